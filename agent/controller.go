package agent

// Controller adapts the episode to the gateway's EpisodeController (Status() any).
func (e *Episode) Controller() *Controller { return &Controller{e: e} }

// Controller is an episode as /api/episodes sees it.
type Controller struct{ e *Episode }

func (c *Controller) ID() string  { return c.e.ID() }
func (c *Controller) Status() any { return c.e.Status() }
func (c *Controller) Pause()      { c.e.Pause() }
func (c *Controller) Resume()     { c.e.Resume() }
func (c *Controller) Step()       { c.e.Step() }
