// Package kernel speaks the Jupyter messaging protocol (5.x) over ZeroMQ (go-zeromq/zmq4, pure Go)
// to real kernels such as ipykernel.
//
// The split follows jupyter_client:
//
//   - wire.go, session.go: the codec. Frames are [identities…, <IDS|MSG>, hmac, header, parent,
//     metadata, content, buffers…]; the four dicts stay raw JSON so unknown fields survive; every
//     incoming signature is checked in constant time and a bad one is dropped and counted.
//   - channels.go, client.go: one long-lived Client per kernel. shell, control and stdin are DEALERs
//     sharing one identity (so input_request reaches us), iopub is a SUB to everything, the
//     heartbeat a DEALER. Each incoming message goes to the pending request that is its parent and
//     to every Subscribe channel; Send forwards a message as given, re-signed; Request waits for a
//     reply.
//   - execute.go: Execute (nbclient's execute_cell: reply and status idle, timeout, and a barrier
//     after a late idle, since ipykernel can send a cell's last output after it).
//   - outputs.go, outrich.go, outtext.go, jsonscan.go: OutputBuilder, one cell's iopub messages as
//     nbformat outputs (nbclient's process_message/output and coalesce_streams), bounded by
//     OutputLimits (head and tail kept, the middle counted and marked) and linear in the output.
//   - spec.go, connection.go, launch.go: kernelspecs, connection files (named with their owner's pid,
//     so a launch removes those a killed owner left behind) and the kernel process
//     (own process group; readiness by iopub_welcome or kernel_info nudges; interrupt; restart;
//     shutdown; death noticed by process wait, or by heartbeat for Attach-ed kernels).
//   - restarter.go: the manager's side of a stuck cell. The client only reports it (Execute's
//     Stuck: still busy after the interrupt); Kernel.Recover restarts, as jupyter_client's
//     KernelManager does for nbclient, never the client behind its caller.
//   - pool.go: prespawned, warmed kernels.
//
// Typical use:
//
//	spec, _ := kernel.FindSpec("pyrualean")
//	k, err := kernel.Launch(ctx, spec, kernel.LaunchOptions{})
//	defer k.Shutdown(context.Background())
//	res, err := k.Client().Execute(ctx, "print(1+1)", kernel.ExecuteOptions{Timeout: time.Minute})
//	// res.Outputs is []notebooks.Output, ready for a notebook
package kernel
