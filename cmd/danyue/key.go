package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/danyue/danyue/bookkey"
	"github.com/schollz/progressbar/v3"
)

func keyCommand() command {
	return command{
		name:    "key",
		usage:   "FILE|DIR... [--algo md5|sha256] [--encoding auto|utf-8|gb18030|utf-16] [--json] [--no-link]",
		summary: "Print the BookKey of text files (or of every .txt file in a directory), and KOReader's id of each; if a daemon runs, tell it which book each KOReader document is, so KOReader progress shows under the book's title on every device.",
		run:     runKey,
	}
}

// progressMin is the input size from which a terminal gets a progress bar;
// smaller files are done before a bar would be read.
const progressMin = 32 << 20

func runKey(ctx context.Context, e *env, args []string) error {
	flags := newFlagSet(e, keyCommand(), "danyue key --json ~/Books")
	algoName := flags.String("algo", "md5", "hash function, `md5|sha256`")
	encName := flags.String("encoding", "auto", "text encoding, `auto|utf-8|gb18030|utf-16`: auto follows the BOM, else takes UTF-8 if valid, else GB18030 (which covers GBK); utf-16 follows the BOM, little-endian if none")
	asJSON := flags.Bool("json", false, "print one JSON object per file: path, key, encoding, utf16Len, bytes, koreaderId")
	data := flags.String("data", defaultDataDir(e), "data `DIR` of the daemon to tell which book each file's KOReader document is, if one runs there (keying needs no daemon); $DANYUE_DATA sets the default")
	noLink := flags.Bool("no-link", false, "do not tell the daemon which book each KOReader document is")
	paths, err := parseArgs(flags, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return &usageError{msg: "key: no file given", hint: "danyue key book.txt"}
	}
	var opt bookkey.Options
	if opt.Algo, err = bookkey.ParseAlgo(*algoName); err != nil {
		return &usageError{msg: fmt.Sprintf("key: unknown --algo %q", *algoName), hint: "danyue key --algo sha256 book.txt"}
	}
	if opt.Encoding, err = bookkey.ParseEncoding(*encName); err != nil {
		return &usageError{msg: fmt.Sprintf("key: unknown --encoding %q", *encName), hint: "danyue key --encoding gb18030 book.txt"}
	}

	failed := false
	report := func(path string, err error) {
		failed = true
		fmt.Fprintf(e.stderr, "danyue: %s\n", describeKeyError(path, err))
	}
	note := func(path string, err error) {
		fmt.Fprintf(e.stderr, "danyue: %s\n", describeKeyError(path, err))
	}
	files, total, sawDir := collectFiles(ctx, paths, report, note)
	if ctx.Err() != nil {
		return ctx.Err()
	}

	p := newKeyProgress(e.stderr, total, total >= progressMin || sawDir)
	defer p.finish()
	out := json.NewEncoder(e.stdout)
	out.SetEscapeHTML(false)
	linker := newKosyncLinker(*data, *noLink)
	defer linker.finish(e.stderr)
	for _, f := range files {
		res, koid, err := keyFile(ctx, f.path, opt, p)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			p.clearFor(e.stderr)
			report(f.path, err)
			continue
		}
		p.clearFor(e.stdout)
		if *asJSON {
			out.Encode(keyLine{Path: f.path, Key: res.Key.String(), Encoding: res.Encoding.String(), UTF16Len: res.UTF16Len, Bytes: res.Bytes, KOReaderID: koid})
		} else {
			fmt.Fprintf(e.stdout, "%s %d %s koreader:%s %s\n", res.Key, res.UTF16Len, res.Encoding, koid, f.path)
		}
		linker.link(ctx, koid, res.Key.String(), f.path)
	}
	if failed {
		return errReported
	}
	return nil
}

// keyLine is one line of --json output.
type keyLine struct {
	Path     string `json:"path"`
	Key      string `json:"key"`
	Encoding string `json:"encoding"`
	UTF16Len int64  `json:"utf16Len"`
	Bytes    int64  `json:"bytes"`
	// KOReaderID is KOReader's partial-MD5 id of the file (of its bytes, not
	// its text), which kosync knows documents by.
	KOReaderID string `json:"koreaderId"`
}

type keyTarget struct {
	path string
	size int64
}

// errNotRegular is a path that is not a regular file: a named pipe, a
// device or a socket, which could block the command for ever or never end.
type errNotRegular struct{ mode fs.FileMode }

func (e errNotRegular) Error() string {
	kind := "a special file"
	switch {
	case e.mode&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case e.mode&fs.ModeSocket != 0:
		kind = "a socket"
	case e.mode&fs.ModeDevice != 0:
		kind = "a device"
	case e.mode.IsDir():
		kind = "a directory"
	}
	return "skipped: " + kind + ", not a regular file"
}

// collectFiles expands the arguments: a file stands for itself, a directory
// for every .txt file under it, in lexical order. Paths that cannot be
// listed, and arguments that are not regular files, are reported and left
// out; a .txt entry of a directory that is not a regular file is noted and
// left out. It stops when ctx ends.
func collectFiles(ctx context.Context, paths []string, report, note func(string, error)) (files []keyTarget, total int64, sawDir bool) {
	for _, p := range paths {
		info, err := os.Stat(p)
		switch {
		case err != nil:
			report(p, err)
			continue
		case !info.IsDir() && !info.Mode().IsRegular():
			report(p, errNotRegular{info.Mode()})
			continue
		case !info.IsDir():
			files = append(files, keyTarget{p, info.Size()})
			total += info.Size()
			continue
		}
		sawDir = true
		filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				report(path, err)
				return nil // WalkDir skips what it could not read
			}
			if d.IsDir() || !strings.EqualFold(filepath.Ext(path), ".txt") {
				return nil
			}
			info, err := os.Stat(path) // follows a symlink, as opening would
			switch {
			case err != nil:
				report(path, err)
			case !info.Mode().IsRegular():
				note(path, errNotRegular{info.Mode()})
			default:
				files = append(files, keyTarget{path, info.Size()})
				total += info.Size()
			}
			return nil
		})
	}
	return files, total, sawDir
}

// keyFile returns the BookKey of a file and KOReader's id of it, which reads
// a few samples of the same open file.
func keyFile(ctx context.Context, path string, opt bookkey.Options, p *keyProgress) (bookkey.Result, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return bookkey.Result{}, "", err
	}
	defer f.Close()
	// Checked again on the open file: the path may have changed since.
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		if err == nil {
			err = errNotRegular{info.Mode()}
		}
		return bookkey.Result{}, "", err
	}
	res, err := bookkey.Read(ctx, p.reader(f), opt)
	if err != nil {
		return bookkey.Result{}, "", err
	}
	koid, err := bookkey.KOReaderID(f)
	return res, koid, err
}

// describeKeyError says what went wrong with one path, without repeating the
// path the way *fs.PathError would.
func describeKeyError(path string, err error) string {
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.Is(err, bookkey.ErrNotSeekable):
		return fmt.Sprintf("%s: not UTF-8 and cannot be read twice to detect its encoding; give --encoding", path)
	}
	return fmt.Sprintf("%s: %v", path, err)
}

// keyProgress draws one progress bar over all the files, if w is a terminal.
// A nil *keyProgress draws nothing.
type keyProgress struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func newKeyProgress(w io.Writer, total int64, worthIt bool) *keyProgress {
	if !worthIt || total <= 0 || !isTerminal(w) {
		return nil
	}
	return &keyProgress{w: w, bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("keying"),
		progressbar.OptionShowBytes(true), // rate
		progressbar.OptionShowCount(),     // bytes done of the total
		progressbar.OptionShowTotalBytes(true),
		progressbar.OptionSetPredictTime(true), // ETA
		progressbar.OptionSetWidth(20),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)}
}

// reader counts what is read from f on the bar. It keeps f seekable: a file
// detected as GB18030 is read a second time, which the bar shows as more work.
func (p *keyProgress) reader(f *os.File) io.Reader {
	if p == nil {
		return f
	}
	return &progressReader{f: f, bar: p.bar}
}

// clearFor takes the bar off the line before a line is printed on w, if w is
// the terminal the bar is on (stdout usually is, unless piped).
func (p *keyProgress) clearFor(w io.Writer) {
	if p != nil && (w == p.w || isTerminal(w)) {
		p.bar.Clear()
	}
}

func (p *keyProgress) finish() {
	if p != nil {
		p.bar.Finish()
	}
}

type progressReader struct {
	f    *os.File
	bar  *progressbar.ProgressBar
	read int64
}

func (r *progressReader) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	r.read += int64(n)
	r.bar.Add64(int64(n))
	return n, err
}

func (r *progressReader) Seek(off int64, whence int) (int64, error) {
	pos, err := r.f.Seek(off, whence)
	if err == nil && pos < r.read {
		r.bar.AddMax64(r.read - pos)
		r.read = pos
	}
	return pos, err
}
