// Package notebooks models nbformat 4.5 notebooks: the shape of every executed cell's outputs, the
// episode trace, and a reader/writer that produce byte-for-byte what Jupyter's own tools write.
//
// Metadata and mime bundles are kept as generic JSON trees (map[string]any with json.Number leaves)
// so that fields we do not know survive a round trip unchanged.
package notebooks

// Output types, as nbformat spells them.
const (
	OutputStream        = "stream"
	OutputDisplayData   = "display_data"
	OutputExecuteResult = "execute_result"
	OutputError         = "error"
)

// MimeBundle maps a mime type to its value: a string for text and base64 images (joined, never split
// into lines in memory), or any JSON value for application/json and application/*+json.
type MimeBundle map[string]any

// Output is one nbformat output. Which fields are meaningful depends on OutputType.
type Output struct {
	OutputType string `json:"output_type"`

	// stream
	Name string `json:"name,omitempty"`
	Text string `json:"text,omitempty"`

	// display_data and execute_result
	Data     MimeBundle     `json:"data,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
	// execute_result (nbformat requires the key, null allowed)
	ExecutionCount *int `json:"execution_count,omitempty"`

	// error
	Ename     string   `json:"ename,omitempty"`
	Evalue    string   `json:"evalue,omitempty"`
	Traceback []string `json:"traceback,omitempty"`

	// DisplayID comes from a message's transient.display_id. It lets update_display_data find the
	// outputs to replace and is never written to a file.
	DisplayID string `json:"-"`
}

// Cell types.
const (
	CellCode     = "code"
	CellMarkdown = "markdown"
	CellRaw      = "raw"
)

// Cell is one nbformat 4.5 cell. Outputs and ExecutionCount belong to code cells only; Attachments to
// markdown and raw cells only.
type Cell struct {
	ID             string                `json:"id"`
	CellType       string                `json:"cell_type"`
	Metadata       map[string]any        `json:"metadata"`
	Source         string                `json:"source"`
	Outputs        []Output              `json:"outputs,omitempty"`
	ExecutionCount *int                  `json:"execution_count,omitempty"`
	Attachments    map[string]MimeBundle `json:"attachments,omitempty"`
}

// Notebook is an nbformat 4.x document.
type Notebook struct {
	Metadata      map[string]any `json:"metadata"`
	Nbformat      int            `json:"nbformat"`
	NbformatMinor int            `json:"nbformat_minor"`
	Cells         []Cell         `json:"cells"`
}
