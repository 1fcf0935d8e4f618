package kernel

import (
	"context"
	"fmt"
)

// Recover is the owner's answer to a stuck cell (ExecuteResult.Stuck), as jupyter_client's manager
// is the one that restarts, never its client: the kernel is killed (a cell that ignored its interrupt
// will not honour a shutdown_request either) and started again on the same ports, and res says
// Restarted. A result that is not stuck is left alone.
func (k *Kernel) Recover(ctx context.Context, res *ExecuteResult) error {
	if res == nil || !res.Stuck {
		return nil
	}
	if err := k.restart(ctx, true); err != nil {
		return fmt.Errorf("%w: restart after a stuck cell: %w", ErrTimeout, err)
	}
	res.Restarted = true
	return nil
}
