package store

import (
	"context"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/danyue/danyue/crdt"
)

// DailyAdd is local reading time on one day ("2006-01-02", the device's
// local date). Daily statistics are this device's own: never synced, never
// in the change sequence.
type DailyAdd struct {
	Day string
	Ms  uint64
}

func checkDay(day string) error {
	t, err := time.Parse(time.DateOnly, day)
	if err != nil || t.Format(time.DateOnly) != day {
		return fmt.Errorf("day %q is not a date of the form 2006-01-02: %w", day, crdt.ErrInvalid)
	}
	return nil
}

// Daily returns the reading time of each day in [from, to] with any, in
// ascending order.
func (s *Store) Daily(ctx context.Context, from, to string) ([]DailyAdd, error) {
	for _, d := range []string{from, to} {
		if err := checkDay(d); err != nil {
			return nil, fmt.Errorf("read daily statistics from store %s: %w", s.dir, err)
		}
	}
	var days []DailyAdd
	err := s.view(ctx, func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pDaily}})
		defer it.Close()
		end := string(dailyKey(to))
		for it.Seek(dailyKey(from)); it.Valid(); it.Next() {
			item := it.Item()
			if string(item.Key()) > end {
				break
			}
			v, err := item.ValueCopy(nil)
			if err != nil {
				return ioErr(s.dir, "read daily statistics", err)
			}
			ms, ok := parseU64(v)
			if !ok {
				return corruptf(s.dir, "malformed daily statistic under key %s", keyName(item.Key()))
			}
			if ms > 0 {
				days = append(days, DailyAdd{Day: string(item.Key()[1:]), Ms: ms})
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return days, nil
}
