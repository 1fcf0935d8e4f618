package seal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// maxWalkDepth bounds how deep walkBeneath goes (one open directory per level): a deeper tree is an
// error (errTooDeep), never a tree left half counted or half given away.
const maxWalkDepth = 4096

// errTooDeep: the tree is deeper than maxWalkDepth (the quota counts such a workspace as over).
var errTooDeep = fmt.Errorf("seal: the workspace is deeper than %d directories", maxWalkDepth)

// walkBeneath calls fn for every entry under root (not root itself), each named relative to the
// directory r that holds it. Every step is relative to an open directory (os.Root), so no path the
// agent builds is ever resolved whole: a chain of directories longer than PATH_MAX is walked like any
// other, and links are visited themselves, never followed. An entry removed during the walk is skipped.
func walkBeneath(root string, fn func(r *os.Root, name string, info fs.FileInfo) error) error {
	r, err := os.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	return walkIn(r, fn, 0)
}

func walkIn(r *os.Root, fn func(*os.Root, string, fs.FileInfo) error, depth int) error {
	if depth >= maxWalkDepth {
		return errTooDeep
	}
	d, err := r.Open(".")
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		info, err := r.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := fn(r, name, info); err != nil {
			return err
		}
		if !info.IsDir() { // a link's Lstat is not a directory: never followed
			continue
		}
		sub, err := r.OpenRoot(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		err = walkIn(sub, fn, depth+1)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
