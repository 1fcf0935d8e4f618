// Package eval runs an evaluation: a matrix of robots × tasks × seeds × arms × models × settings,
// expanded into episodes with deterministic ids and run folders, recorded in a manifest that makes a
// rerun resume, scheduled by an Engine, watched live, and summarised with confidence intervals.
//
// The package knows nothing about how one episode runs: the caller hands the engine an Executor that runs
// one Episode into its run folder (eval/inproc's, in this process; inproc.Run is a whole suite from Go). A later engine (a cluster one) only
// has to implement Engine; ids, folders, manifest, resume and statistics stay the same.
//
//	matrix.go    Matrix and Row (flags or a TOML/YAML file), task and seed selections
//	episode.go   Episode: one expanded cell of the matrix, its id and run folder
//	manifest.go  the suite's manifest.json (matrix, versions, per-episode state), written atomically
//	runner.go    Runner: plan → resume decisions → engine → manifest updates, retries with backoff
//	engine.go    Engine (the scheduler seam) and Local, the in-process worker pool (ready-first: a free
//	             worker takes the first job in plan order whose After has ended)
//	ray.go       Ray: the suite handed to pyrualean's service job on the cluster (rayservice), an
//	             episode per task
//	events.go    Event, the stream the live view and --json read
//	progress.go  the live view: a progress display on a terminal, one line per episode otherwise
//	status.go    `eval --status`: a suite's state from its manifest and run folders
//	stats.go     Wilson intervals, paired bootstrap, per-group cells-vs-tools comparison
//	endpoint.go  per-endpoint connection limits and 429/Retry-After backoff shared by all episodes
//
// Adding an engine (a cluster, say): implement Engine in a new file; its Run gets the jobs in plan
// order (a job's After first) and a run func that does one episode with retries and records it.
// Either call run for each job where the engine decides (run in turn calls the Executor), or keep
// Local for the scheduling and swap the Executor for one that runs the episode on a node and brings
// its run folder back to j.Dir. Ids, folders, the manifest, resume and the statistics do not change.
// Ray does the first and is its own Executor: the cluster schedules, a run starts when the episode's
// task starts on a node (`pyrualean episode`, the same Executor as a local run), Execute waits for
// the attempt's outcome and unpacks the run folder into j.Dir, and the service retries with the
// runner's rule (an engine that retries implements setRetries), so each attempt is recorded once;
// it starts the next episode's run once the attempts that ended are recorded (recorded), so the
// live view counts what runs.
package eval
