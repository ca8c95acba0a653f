// Command pairattack is someone on the LAN attacking danyue's short-code
// pairing, for the testnet scenario pair-attack and for trying a build by
// hand. It speaks the pairing protocol (pair/rendezvous) and nothing else:
//
//   - burn: watch the mDNS announcements of _danyue-pair._tcp and spend each
//     code announced with one wrong guess (random words on the announced
//     channel), -count times in all;
//   - fake: announce a channel (-channel, or with -follow the channel of the
//     first announcement seen) and answer joiners as if it were the inviter,
//     with a code of random words, for -sessions sessions.
//
// It prints one JSON object per line: what it announced, and what each
// session gave. Run it only on a network of your own, such as the testnet's
// namespaces:
//
//	go run ./testnet/cmd/pairattack burn -count 3
//	go run ./testnet/cmd/pairattack fake -follow -sessions 1
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/danyue/danyue/pair"
	"github.com/danyue/danyue/pair/rendezvous"
)

// line is one line of output.
type line struct {
	Event    string   `json:"event"` // announce, burn, session
	Channel  int      `json:"channel,omitempty"`
	Instance string   `json:"instance,omitempty"`
	Addr     string   `json:"addr,omitempty"`
	Addrs    []string `json:"addrs,omitempty"`
	// Result is wrong_code (the guess was tested and wrong), refused (the
	// inviter did not test it), paired (the guess was right), or error.
	Result string `json:"result,omitempty"`
	// Reason is a refusal's reason: burned, in_use, blocked, used,
	// expired, unknown.
	Reason string `json:"reason,omitempty"`
	From   string `json:"from,omitempty"`
	Detail string `json:"detail,omitempty"`
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	channel := fs.Int("channel", 0, "the channel to burn or announce (burn: 0 is every channel)")
	count := fs.Int("count", 1, "burn: codes to burn before exiting")
	follow := fs.Bool("follow", false, "fake: announce the channel of the first announcement seen")
	sessions := fs.Int("sessions", 1, "fake: joiner sessions to answer before exiting")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	verbose := fs.Bool("v", false, "log the protocol's lines on stderr")
	fs.Parse(os.Args[2:])
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	var err error
	switch os.Args[1] {
	case "burn":
		err = burn(ctx, *channel, *count, log)
	case "fake":
		err = fake(ctx, *channel, *follow, *sessions, log)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pairattack:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: pairattack burn|fake [flags]; pairattack burn -h for the flags")
	os.Exit(2)
}

func emit(l line) {
	b, _ := json.Marshal(l)
	fmt.Println(string(b))
}

// guess is a code of random words on channel.
func guess(channel int) (pair.Code, error) {
	c, err := pair.NewCode()
	c.Channel = channel
	return c, err
}

// burn spends count announced codes, one guess each.
func burn(ctx context.Context, channel, count int, log *slog.Logger) error {
	tried := make(map[string]bool) // instances, each a code
	for n := 0; n < count; {
		anns, err := rendezvous.Browse(ctx, channel, nil, log)
		if err != nil {
			return fmt.Errorf("browse: %w", err)
		}
		for _, a := range anns {
			if tried[a.Instance] || n >= count {
				continue
			}
			tried[a.Instance] = true
			code, err := guess(a.Channel)
			if err != nil {
				return err
			}
			j := &rendezvous.Joiner{Code: code, AD: []byte(`{"device":"","name":"pairattack"}`), Logger: log}
			l := line{Event: "burn", Channel: a.Channel, Instance: a.Instance}
			for _, addr := range a.Addrs {
				l.Addr = addr
				_, err = j.Join(ctx, addr)
				if !errors.Is(err, rendezvous.ErrUnreachable) {
					break
				}
			}
			describe(&l, err)
			emit(l)
			n++
		}
	}
	return nil
}

// describe fills in what a session's error says.
func describe(l *line, err error) {
	var r *pair.Refusal
	switch {
	case err == nil:
		l.Result = "paired"
	case errors.Is(err, pair.ErrWrongCode):
		l.Result = "wrong_code"
	case errors.As(err, &r):
		l.Result = "refused"
		l.Reason = map[pair.Reason]string{
			pair.ReasonBurned: "burned", pair.ReasonInUse: "in_use", pair.ReasonBlocked: "blocked",
			pair.ReasonUsed: "used", pair.ReasonExpired: "expired",
		}[r.Reason]
		if l.Reason == "" {
			l.Reason = "unknown"
		}
		if r.By.IsValid() {
			l.From = r.By.String()
		}
	default:
		l.Result = "error"
	}
	if err != nil {
		l.Detail = err.Error()
	}
}

// fake answers joiners on a channel with a code of its own.
func fake(ctx context.Context, channel int, follow bool, sessions int, log *slog.Logger) error {
	if follow {
		anns, err := rendezvous.Browse(ctx, 0, nil, log)
		if err != nil {
			return fmt.Errorf("browse: %w", err)
		}
		channel = anns[0].Channel
	}
	if channel < 1 || channel > pair.MaxChannel {
		return fmt.Errorf("no channel to announce: give -channel 1..%d or -follow", pair.MaxChannel)
	}
	for range sessions {
		code, err := guess(channel)
		if err != nil {
			return err
		}
		inv := &pair.Invitation{Code: code, Expires: time.Now().Add(pair.DefaultValidity)}
		h, err := rendezvous.Open(rendezvous.Config{
			Invitation: inv, Announce: true, Logger: log,
			AD:      []byte(`{"device":"","name":"inviter"}`),
			Payload: func() ([]byte, error) { return []byte("danyue1-not-your-library"), nil },
		})
		if err != nil {
			return err
		}
		emit(line{Event: "announce", Channel: channel, Addrs: h.Addrs()})
		select {
		case <-h.Done():
		case <-ctx.Done():
			h.Close()
			return nil
		}
		o, _ := h.Outcome()
		l := line{Event: "session", Channel: channel, Result: "wrong_code"}
		if o.From.IsValid() {
			l.From = o.From.String()
		}
		if o.Paired {
			l.Result = "paired" // the guess was right: the joiner took our payload
		} else if !errors.Is(o.Err, pair.ErrWrongCode) {
			l.Result, l.Detail = "error", fmt.Sprint(o.Err)
		}
		emit(l)
		h.Close()
	}
	return nil
}
