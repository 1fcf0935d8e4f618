package gateway

import (
	"fmt"
	"sort"
	"sync"
)

// kernelRegistry is the set of kernels the gateway serves, by id (jupyter_client's MultiKernelManager):
// lookup, listing and the MaxKernels count, starts in progress included. Launching, serving and
// stopping a kernel is Server's (kernels.go); the HTTP handlers only go through these two.
type kernelRegistry struct {
	max int // 0 = unlimited

	mu       sync.Mutex
	byID     map[string]*managedKernel
	starting int
}

func newKernelRegistry(max int) *kernelRegistry {
	return &kernelRegistry{max: max, byID: map[string]*managedKernel{}}
}

// get returns the kernel with id, or ErrNoSuchKernel.
func (r *kernelRegistry) get(id string) (*managedKernel, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if mk := r.byID[id]; mk != nil {
		return mk, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNoSuchKernel, id)
}

// all returns every kernel, ordered by id.
func (r *kernelRegistry) all() []*managedKernel {
	r.mu.Lock()
	ks := make([]*managedKernel, 0, len(r.byID))
	for _, k := range r.byID {
		ks = append(ks, k)
	}
	r.mu.Unlock()
	sort.Slice(ks, func(i, j int) bool { return ks[i].id < ks[j].id })
	return ks
}

// reserve counts a start against the limit (and checks that a client-supplied id is free) until
// release; the started kernel is then added.
func (r *kernelRegistry) reserve(id string) (release func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id != "" && r.byID[id] != nil {
		return nil, fmt.Errorf("%w: kernel %s already exists", errConflict, id)
	}
	if r.max > 0 && len(r.byID)+r.starting >= r.max {
		return nil, fmt.Errorf("%w (%d): shut one down first", ErrTooManyKernel, r.max)
	}
	r.starting++
	return func() {
		r.mu.Lock()
		r.starting--
		r.mu.Unlock()
	}, nil
}

func (r *kernelRegistry) add(mk *managedKernel) {
	r.mu.Lock()
	r.byID[mk.id] = mk
	r.mu.Unlock()
}

// remove forgets a kernel and returns it (nil if unknown).
func (r *kernelRegistry) remove(id string) *managedKernel {
	r.mu.Lock()
	defer r.mu.Unlock()
	mk := r.byID[id]
	delete(r.byID, id)
	return mk
}
