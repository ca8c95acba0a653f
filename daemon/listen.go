package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/danyue/danyue/store"
)

// The API listens on a local endpoint that only this user can open (a unix
// socket inside the 0700 data dir, so it is never reachable by other users,
// not even before its mode is set; a named pipe on Windows: listen_*.go)
// and, if asked, on a loopback TCP port that requires the bearer token.

type connKind int

const (
	// connUnix is the local endpoint: the unix socket, or the named pipe
	// on Windows.
	connUnix connKind = iota + 1
	connTCP
	// connInProcess is a request made by the process that started the
	// daemon, through InProcess: no listener at all.
	connInProcess
)

type connInfoKey struct{}

// connInfo is what the daemon knows about the other end of one connection.
type connInfo struct {
	kind connKind
	uid  int // the peer's uid on a unix socket, -1 if the OS did not say
	// vouched: on the local endpoint, the OS stands for the caller: its
	// peer credentials gave uid (Linux, Android, macOS, FreeBSD), or only
	// this user could open the endpoint (the pipe's DACL on Windows; the
	// socket's directory where the OS has no peer credentials). False when
	// the OS could have told and did not: such a caller is refused.
	vouched bool
}

func (d *Daemon) serveAPI() error {
	d.limits = d.listenLimits()
	lim := d.limits
	d.log.Debug("connection limits", "open_files", lim.nofile,
		"local", lim.local.conns.Max, "tcp", lim.tcp.conns.Max, "tcp_per_addr", lim.tcp.conns.PerAddr,
		"kosync", lim.kosync.conns.Max, "kosync_per_addr", lim.kosync.conns.PerAddr)
	handler := d.routes()
	if !d.cfg.NoSocket {
		localLn, err := listenLocal(d.cfg.Socket)
		if err != nil {
			return err
		}
		d.serveLimited("api", localLn, apiServer(handler), lim.local, localCaller)
	}
	if tcpLn := d.early.http; tcpLn != nil {
		d.httpAddr = tcpLn.Addr().String()
		d.serveLimited("api", tcpLn, apiServer(handler), lim.tcp, func(net.Conn) connInfo { return connInfo{kind: connTCP, uid: -1} })
		d.log.Info("serving the API on TCP", "addr", d.httpAddr, "token_file", filepath.Join(d.cfg.DataDir, "api-token"))
		if !isLoopbackAddr(d.httpAddr) {
			d.log.Warn("the API is reachable from the network (--http-allow-remote): the bearer token is its only protection; keep it secret", "addr", d.httpAddr)
		}
	}
	return nil
}

// apiServer is the server of one API listener; serveLimited adds the
// timeouts and caps. It has no WriteTimeout, which would end event streams:
// a write that stalls is cut by the listener instead.
func apiServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:        h,
		MaxHeaderBytes: 16 << 10,
		ErrorLog:       nil,
	}
}

// HTTPAddr returns the address of the TCP listener, if there is one (useful
// when it was started on port 0).
func (d *Daemon) HTTPAddr() string { return d.httpAddr }

// ErrNotLoopback is returned for a --http address that is reachable from
// other machines when that was not explicitly allowed.
var ErrNotLoopback = errors.New("not a loopback address")

func listenTCP(addr string, allowRemote bool) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %w", addr, err)
	}
	if !allowRemote {
		ip := net.ParseIP(host)
		if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("--http %s: %w; the API would be reachable from the network (use 127.0.0.1, or --http-allow-remote if you really mean it)", addr, ErrNotLoopback)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// loadOrCreateToken returns the API bearer token kept in path, creating it
// (0600, written atomically) on first start. A token file that others could
// read is made private, with a warning, as the secrets file is: whoever read
// it may have the token, which the user may want to replace.
func loadOrCreateToken(path string, log *slog.Logger) (string, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		tok := strings.TrimSpace(string(raw))
		if len(tok) < 32 {
			return "", fmt.Errorf("API token in %s is too short; delete the file to make a new one", path)
		}
		tightened, err := store.MakeFilePrivate(path)
		if err != nil {
			return "", fmt.Errorf("make API token %s private: %w", path, err)
		}
		if tightened {
			log.Warn("API token file was readable by other users; made it private (delete it and restart to get a new token)", "path", path)
		}
		return tok, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read API token: %w", err)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b[:])
	if err := writeFileAtomic(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write API token: %w", err)
	}
	return tok, nil
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
