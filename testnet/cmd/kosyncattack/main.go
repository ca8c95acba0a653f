// Command kosyncattack guesses KOReader passwords against a kosync listener
// on this machine, to measure what a guesser gets: how many guesses a second
// are answered, how many reach the slow key verifier, whether any is
// accepted, and whether a known account answers in another time than an
// unknown one.
//
//	danyue daemon --data /tmp/x --kosync 127.0.0.1:7299 --no-mdns --listen /ip4/127.0.0.1/tcp/0 &
//	echo secret | danyue kosync adduser alice --password-stdin --data /tmp/x
//	go run ./testnet/cmd/kosyncattack -url http://127.0.0.1:7299 -user alice -mode guess -workers 32 -duration 60s
//	go run ./testnet/cmd/kosyncattack -url http://127.0.0.1:7299 -user alice -mode timing -n 5000
//	go run ./testnet/cmd/kosyncattack -url http://127.0.0.1:7299 -user alice -password secret -mode oracle \
//	    -user2 bob -password2 other -duration 10s
//
// The oracle mode asks whether a lock can be told from a wrong key: the
// owner's device signs in from 127.0.0.1 (so the daemon knows its key),
// then workers on keep-alive connections from one other address
// (127.0.0.2) guess at the account, the real key among every 50th guess,
// and the tool prints the answers the wrong keys and the real key got. With
// -user2, the other account's real key is then tried from the guessing
// address, and the owner's device signs in again from its own.
//
// Guesses come from -sources loopback addresses (127.0.0.2 and up), each on
// a new connection, as from as many machines. How many reached the key
// verifier only the daemon knows: given its log (-log, the text format the
// daemon writes), the tool waits for the daemon's per-minute count of failed
// sign-ins and adds up the verified ones per minute. Only loopback targets
// are accepted: this is a test tool, not a weapon.
package main

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	target := flag.String("url", "http://127.0.0.1:7299", "kosync listener (loopback only), with its prefix if any")
	user := flag.String("user", "alice", "the account to guess at (known to the server)")
	unknown := flag.String("unknown", "nobody-here", "an account the server does not know (timing mode)")
	mode := flag.String("mode", "guess", "guess: workers guess for -duration; timing: -n requests each for the known and the unknown account; oracle: can a lock be told from a wrong key")
	workers := flag.Int("workers", 32, "concurrent guessers (guess mode)")
	duration := flag.Duration("duration", 10*time.Second, "how long to guess (guess mode)")
	n := flag.Int("n", 5000, "requests per account (timing mode)")
	sources := flag.Int("sources", 50, "loopback source addresses to spread guesses over (127.0.0.2 up); 0: the default address")
	slow := flag.Duration("slow", 5*time.Millisecond, "timing mode: count answers at least this slow")
	logPath := flag.String("log", "", "guess mode: the daemon's log, to count the guesses that reached the verifier")
	password := flag.String("password", "", "the account's real password: sent as every 50th guess, to see it refused while limited")
	user2 := flag.String("user2", "", "oracle mode: another account, tried with its real key from the guessing address")
	password2 := flag.String("password2", "", "oracle mode: the real password of -user2")
	flag.Parse()
	if *mode == "oracle" {
		err := oracle(*target, *user, *password, *user2, *password2, *workers, *duration)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kosyncattack:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*target, *user, *unknown, *mode, *workers, *duration, *n, *sources, *slow, *password, *logPath); err != nil {
		fmt.Fprintln(os.Stderr, "kosyncattack:", err)
		os.Exit(1)
	}
}

func run(target, user, unknown, mode string, workers int, duration time.Duration, n, sources int, slow time.Duration, password, logPath string) error {
	if _, err := checkLoopback(target); err != nil {
		return err
	}
	if workers < 1 || n < 1 || duration <= 0 || sources < 0 || sources > 250 {
		return errors.New("-workers and -n must be positive, -duration too, -sources in [0, 250]")
	}
	clients := make([]*http.Client, max(sources, 1))
	for i := range clients {
		d := &net.Dialer{Timeout: 5 * time.Second}
		if sources > 0 {
			d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}
		}
		clients[i] = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	}
	a := &attack{url: target + "/users/auth", clients: clients}
	switch mode {
	case "guess":
		start := time.Now()
		if err := a.guess(user, workers, duration, password); err != nil || logPath == "" {
			return err
		}
		return a.countVerified(logPath, user, start)
	case "timing":
		return a.timing(user, unknown, n, slow)
	}
	return fmt.Errorf("-mode %q: want guess or timing", mode)
}

type attack struct {
	url     string
	clients []*http.Client
	next    atomic.Int64
}

// try sends one sign-in and returns its status and how long it took.
func (a *attack) try(ctx context.Context, user, key string) (int, time.Duration, error) {
	hc := a.clients[int(a.next.Add(1))%len(a.clients)]
	req, err := http.NewRequestWithContext(ctx, "GET", a.url, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header["x-auth-user"] = []string{user}
	req.Header["x-auth-key"] = []string{key}
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), nil
}

// checkLoopback refuses a target that is not on this machine.
func checkLoopback(target string) (*url.URL, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ips, err := net.LookupIP(u.Hostname())
	if err != nil || len(ips) == 0 || !ips[0].IsLoopback() {
		return nil, fmt.Errorf("%s is not a loopback address: this tool only measures a daemon on this machine", u.Hostname())
	}
	return u, nil
}

func randomKey() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return hex.EncodeToString(b[:])
}

func (a *attack) guess(user string, workers int, duration time.Duration, password string) error {
	realKey := ""
	if password != "" {
		sum := md5.Sum([]byte(password))
		realKey = hex.EncodeToString(sum[:])
	}
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var mu sync.Mutex
	status := map[int]int{}
	var sent, accepted, realSent, realAccepted, errs int
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				key, isReal := randomKey(), false
				mu.Lock()
				if realKey != "" && sent%50 == 49 {
					key, isReal = realKey, true
				}
				sent++
				mu.Unlock()
				st, _, err := a.try(ctx, user, key)
				mu.Lock()
				switch {
				case err != nil && ctx.Err() != nil:
					sent--
				case err != nil:
					errs++
				default:
					status[st]++
					if st == http.StatusOK {
						if isReal {
							realAccepted++
						} else {
							accepted++
						}
					}
					if isReal {
						realSent++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	fmt.Printf("guessed at %q for %v with %d workers from %d addresses\n", user, el.Round(time.Millisecond), workers, len(a.clients))
	fmt.Printf("guesses answered: %d (%.0f/s); statuses %v; errors %d\n", sent-errs, float64(sent-errs)/el.Seconds(), status, errs)
	fmt.Printf("wrong keys accepted: %d\n", accepted)
	if realKey != "" {
		fmt.Printf("the real key sent %d times among them, accepted %d times\n", realSent, realAccepted)
	}
	return nil
}

// countVerified reads the daemon's log for the failed sign-ins at user since
// start that reached the verifier: the lines logged one by one, and the
// per-minute counts of the rest (all accounts: guess at one account only).
// The daemon writes a minute's count at the first failure after it, so
// this waits out the minute and sends one more guess at another account.
func (a *attack) countVerified(path, user string, start time.Time) error {
	fmt.Println("waiting 61 s for the daemon's last per-minute count...")
	time.Sleep(61 * time.Second)
	if _, _, err := a.try(context.Background(), "kosyncattack-flush", randomKey()); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	perMin := map[int]int{}
	field := func(line, name string) string {
		i := strings.Index(line, " "+name+"=")
		if i < 0 {
			return ""
		}
		v := line[i+len(name)+2:]
		if strings.HasPrefix(v, `"`) {
			v, _, _ = strings.Cut(v[1:], `"`)
			return v
		}
		v, _, _ = strings.Cut(v, " ")
		return v
	}
	total := 0
	for line := range strings.Lines(string(data)) {
		line = " " + strings.TrimSpace(line)
		var at time.Time
		n := 0
		switch field(line, "msg") {
		case "kosync sign-in failed":
			if field(line, "user") != user || field(line, "why") != "wrong key or unknown account" {
				continue
			}
			at, err = time.Parse(time.RFC3339Nano, field(line, "time"))
			n = 1
		case "kosync failed sign-ins, not logged one by one":
			at, err = time.Parse(time.RFC3339Nano, field(line, "since"))
			n, _ = strconv.Atoi(field(line, "verified"))
		default:
			continue
		}
		if err != nil || at.Before(start.Add(-time.Second)) {
			continue
		}
		perMin[int(max(at.Sub(start), 0)/time.Minute)] += n
		total += n
	}
	fmt.Printf("guesses at %q that reached the verifier (daemon's log): %d", user, total)
	for m := range slices.Max(append(slices.Collect(maps.Keys(perMin)), 0)) + 1 {
		fmt.Printf("; minute %d: %d", m+1, perMin[m])
	}
	fmt.Println()
	return nil
}

func (a *attack) timing(known, unknown string, n int, slow time.Duration) error {
	ctx := context.Background()
	lat := map[string][]time.Duration{}
	// Interleaved, so that drift of the machine's load falls on both alike.
	for i := range 2 * n {
		user := known
		if i%2 == 1 {
			user = unknown
		}
		_, took, err := a.try(ctx, user, randomKey())
		if err != nil {
			return err
		}
		lat[user] = append(lat[user], took)
	}
	fmt.Printf("%d sign-ins each with a wrong key, interleaved, from %d addresses\n", n, len(a.clients))
	for _, user := range []string{known, unknown} {
		l := lat[user]
		slices.Sort(l)
		nslow := 0
		for _, d := range l {
			if d >= slow {
				nslow++
			}
		}
		fmt.Printf("%-8s %-14q p50 %v  p90 %v  p99 %v  (slower than %v: %d)\n", map[bool]string{true: "known", false: "unknown"}[user == known],
			user, l[len(l)/2], l[len(l)*9/10], l[len(l)*99/100], slow, nslow)
	}
	d := lat[known][n/2] - lat[unknown][n/2]
	fmt.Printf("median difference known - unknown: %v\n", d)
	return nil
}
