package bookkey

import (
	"context"
	"os"
)

// File keys the file at path. It is a convenience around Read, and the only
// place the package touches the file system. A file is seekable, so Auto mode
// always works.
func File(ctx context.Context, path string, opt Options) (Result, error) {
	if err := opt.check(); err != nil {
		return Result{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	return Read(ctx, f, opt)
}
