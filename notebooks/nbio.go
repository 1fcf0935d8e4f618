package notebooks

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/pyrualean/pyrualean/atomicfile"
)

// ErrFormat reports a document that is not a valid nbformat 4 notebook (after upgrading an nbformat 3
// one) that we can hold without loss.
var ErrFormat = errors.New("notebooks: not a valid nbformat 4 notebook")

// Read parses an .ipynb document. An nbformat 3 document is upgraded to 4.5 as nbformat.read(...,
// as_version=4) does; a v4 document missing a key nbformat's schema requires is refused. Multi-line values written as lists of strings are joined (as
// nbformat's reader does), transient keys (orig_nbformat, signature, trusted) are dropped, and all other
// metadata is kept as generic JSON with json.Number leaves so numbers round-trip exactly.
func Read(r io.Reader) (*Notebook, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the notebook", ErrFormat)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: top level is %s, not an object", ErrFormat, jsonKind(doc))
	}
	nb := &Notebook{}
	var err error
	if nb.Nbformat, err = intField(top, "nbformat", true); err != nil {
		return nil, err
	}
	if nb.Nbformat == 3 {
		// Jupyter opens nbformat 3 files by upgrading them; so do we.
		if top, err = upgradeV3(top); err != nil {
			return nil, fmt.Errorf("upgrading nbformat 3: %w", err)
		}
		nb.Nbformat = 4
	}
	if nb.Nbformat != 4 {
		return nil, fmt.Errorf("%w: nbformat %d (only 3, upgraded as Jupyter does, and 4 are read)", ErrFormat, nb.Nbformat)
	}
	if nb.NbformatMinor, err = intField(top, "nbformat_minor", true); err != nil {
		return nil, err
	}
	if err := requireKeys(top, "notebook", "metadata"); err != nil {
		return nil, err
	}
	if nb.Metadata, err = objectField(top, "metadata"); err != nil {
		return nil, err
	}
	if nb.Metadata == nil {
		nb.Metadata = map[string]any{}
	}
	for _, k := range []string{"orig_nbformat", "orig_nbformat_minor", "signature"} {
		delete(nb.Metadata, k)
	}
	for k := range top {
		switch k {
		case "metadata", "nbformat", "nbformat_minor", "cells":
		default:
			return nil, fmt.Errorf("%w: unknown top-level key %q", ErrFormat, k)
		}
	}
	rawCells, ok := top["cells"].([]any)
	if !ok {
		return nil, fmt.Errorf("%w: cells is %s, not a list", ErrFormat, jsonKind(top["cells"]))
	}
	nb.Cells = make([]Cell, 0, len(rawCells))
	for i, rc := range rawCells {
		c, err := readCell(rc)
		if err != nil {
			return nil, fmt.Errorf("cell %d: %w", i, err)
		}
		nb.Cells = append(nb.Cells, c)
	}
	return nb, nil
}

// ReadFile reads the notebook at path.
func ReadFile(path string) (*Notebook, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	nb, err := Read(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nb, nil
}

func readCell(v any) (Cell, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Cell{}, fmt.Errorf("%w: cell is %s, not an object", ErrFormat, jsonKind(v))
	}
	var c Cell
	var err error
	if c.CellType, err = stringField(m, "cell_type", true); err != nil {
		return c, err
	}
	if c.ID, err = stringField(m, "id", false); err != nil {
		return c, err
	}
	if c.Metadata, err = objectField(m, "metadata"); err != nil {
		return c, err
	}
	if c.Metadata == nil {
		c.Metadata = map[string]any{}
	}
	delete(c.Metadata, "trusted")
	if c.Source, err = multiline(m["source"], "source"); err != nil {
		return c, err
	}
	allowed := map[string]bool{"id": true, "cell_type": true, "metadata": true, "source": true}
	switch c.CellType {
	case CellCode:
		allowed["outputs"], allowed["execution_count"] = true, true
		if c.ExecutionCount, err = optInt(m, "execution_count"); err != nil {
			return c, err
		}
		outs, ok := m["outputs"].([]any)
		if !ok && m["outputs"] != nil {
			return c, fmt.Errorf("%w: outputs is %s, not a list", ErrFormat, jsonKind(m["outputs"]))
		}
		c.Outputs = make([]Output, 0, len(outs))
		for j, ro := range outs {
			o, err := readOutput(ro)
			if err != nil {
				return c, fmt.Errorf("output %d: %w", j, err)
			}
			c.Outputs = append(c.Outputs, o)
		}
	case CellMarkdown, CellRaw:
		allowed["attachments"] = true
		if ra, present := m["attachments"]; present {
			am, ok := ra.(map[string]any)
			if !ok {
				return c, fmt.Errorf("%w: attachments is %s, not an object", ErrFormat, jsonKind(ra))
			}
			c.Attachments = make(map[string]MimeBundle, len(am))
			for name, b := range am {
				bm, ok := b.(map[string]any)
				if !ok {
					return c, fmt.Errorf("%w: attachment %q is %s, not an object", ErrFormat, name, jsonKind(b))
				}
				c.Attachments[name] = rejoinBundle(bm)
			}
		}
	default:
		return c, fmt.Errorf("%w: unknown cell_type %q", ErrFormat, c.CellType)
	}
	for k := range m {
		if !allowed[k] {
			return c, fmt.Errorf("%w: unknown key %q in a %s cell", ErrFormat, k, c.CellType)
		}
	}
	required := []string{"metadata", "source"}
	if c.CellType == CellCode {
		required = append(required, "outputs", "execution_count")
	}
	if err := requireKeys(m, c.CellType+" cell", required...); err != nil {
		return c, err
	}
	return c, nil
}

// requiredOutputKeys are the keys nbformat's v4 schema requires of each output type (beside
// output_type).
var requiredOutputKeys = map[string][]string{
	OutputStream:        {"name", "text"},
	OutputDisplayData:   {"data", "metadata"},
	OutputExecuteResult: {"data", "metadata", "execution_count"},
	OutputError:         {"ename", "evalue", "traceback"},
}

// requireKeys reports the first key nbformat's v4 schema requires that m lacks, in the validator's
// words, so that a notebook Jupyter calls invalid is refused here too rather than read with
// defaults (a code cell without outputs is not a cell that ran and printed nothing).
func requireKeys(m map[string]any, what string, keys ...string) error {
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("%w: invalid %s: '%s' is a required property", ErrFormat, what, k)
		}
	}
	return nil
}

func readOutput(v any) (Output, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Output{}, fmt.Errorf("%w: output is %s, not an object", ErrFormat, jsonKind(v))
	}
	var o Output
	var err error
	if o.OutputType, err = stringField(m, "output_type", true); err != nil {
		return o, err
	}
	allowed := map[string]bool{"output_type": true}
	switch o.OutputType {
	case OutputStream:
		allowed["name"], allowed["text"] = true, true
		if o.Name, err = stringField(m, "name", true); err != nil {
			return o, err
		}
		if o.Text, err = multiline(m["text"], "text"); err != nil {
			return o, err
		}
	case OutputDisplayData, OutputExecuteResult:
		allowed["data"], allowed["metadata"] = true, true
		data, err := objectField(m, "data")
		if err != nil {
			return o, err
		}
		o.Data = rejoinBundle(data)
		if o.Metadata, err = objectField(m, "metadata"); err != nil {
			return o, err
		}
		if o.Metadata == nil {
			o.Metadata = map[string]any{}
		}
		if o.OutputType == OutputExecuteResult {
			allowed["execution_count"] = true
			if o.ExecutionCount, err = optInt(m, "execution_count"); err != nil {
				return o, err
			}
		}
	case OutputError:
		allowed["ename"], allowed["evalue"], allowed["traceback"] = true, true, true
		if o.Ename, err = stringField(m, "ename", true); err != nil {
			return o, err
		}
		if o.Evalue, err = stringField(m, "evalue", true); err != nil {
			return o, err
		}
		tb, ok := m["traceback"].([]any)
		if !ok && m["traceback"] != nil {
			return o, fmt.Errorf("%w: traceback is %s, not a list", ErrFormat, jsonKind(m["traceback"]))
		}
		o.Traceback = make([]string, 0, len(tb))
		for _, l := range tb {
			s, ok := l.(string)
			if !ok {
				return o, fmt.Errorf("%w: traceback line is %s, not a string", ErrFormat, jsonKind(l))
			}
			o.Traceback = append(o.Traceback, s)
		}
	default:
		return o, fmt.Errorf("%w: unsupported output_type %q", ErrFormat, o.OutputType)
	}
	for k := range m {
		if !allowed[k] {
			return o, fmt.Errorf("%w: unknown key %q in a %s output", ErrFormat, k, o.OutputType)
		}
	}
	if err := requireKeys(m, o.OutputType+" output", requiredOutputKeys[o.OutputType]...); err != nil {
		return o, err
	}
	return o, nil
}

// rejoinBundle joins list-of-strings values of non-JSON mime types, as nbformat's reader does.
func rejoinBundle(m map[string]any) MimeBundle {
	if m == nil {
		return MimeBundle{}
	}
	for k, v := range m {
		if isJSONMime(k) {
			continue
		}
		if s, ok := joinStrings(v); ok {
			m[k] = s
		}
	}
	return MimeBundle(m)
}

func isJSONMime(mime string) bool {
	return mime == "application/json" || (strings.HasPrefix(mime, "application/") && strings.HasSuffix(mime, "+json"))
}

// splitMime says whether the writer splits a bundle value into lines (nbformat's _split_mimebundle).
func splitMime(mime string) bool {
	return strings.HasPrefix(mime, "text/") || mime == "application/javascript" || mime == "image/svg+xml"
}

func joinStrings(v any) (string, bool) {
	l, ok := v.([]any)
	if !ok {
		return "", false
	}
	var b strings.Builder
	for _, x := range l {
		s, ok := x.(string)
		if !ok {
			return "", false
		}
		b.WriteString(s)
	}
	return b.String(), true
}

func multiline(v any, name string) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	}
	if s, ok := joinStrings(v); ok {
		return s, nil
	}
	return "", fmt.Errorf("%w: %s is %s, not a string or a list of strings", ErrFormat, name, jsonKind(v))
}

func stringField(m map[string]any, key string, required bool) (string, error) {
	v, ok := m[key]
	if !ok {
		if required {
			return "", fmt.Errorf("%w: missing %q", ErrFormat, key)
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: %q is %s, not a string", ErrFormat, key, jsonKind(v))
	}
	return s, nil
}

func objectField(m map[string]any, key string) (map[string]any, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, nil
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: %q is %s, not an object", ErrFormat, key, jsonKind(v))
	}
	return o, nil
}

func intField(m map[string]any, key string, required bool) (int, error) {
	p, err := optInt(m, key)
	if err != nil {
		return 0, err
	}
	if p == nil {
		if required {
			return 0, fmt.Errorf("%w: missing %q", ErrFormat, key)
		}
		return 0, nil
	}
	return *p, nil
}

func optInt(m map[string]any, key string) (*int, error) {
	v := m[key]
	if v == nil {
		return nil, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return nil, fmt.Errorf("%w: %q is %s, not an integer", ErrFormat, key, jsonKind(v))
	}
	i, err := strconv.Atoi(string(n))
	if err != nil {
		return nil, fmt.Errorf("%w: %q is %s, not an integer", ErrFormat, key, n)
	}
	return &i, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// Write writes nb exactly as nbformat.write does: sorted keys, indent 1, text split into lines with
// Python's splitlines(keepends=True), images as one base64 string, no transient keys, final newline.
func (nb *Notebook) Write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := pyEncoder{w: bw}
	if err := enc.encode(nb.tree(), 0); err != nil {
		return fmt.Errorf("notebooks: write: %w", err)
	}
	bw.WriteByte('\n')
	return bw.Flush()
}

// Bytes returns the canonical file bytes of nb.
func (nb *Notebook) Bytes() ([]byte, error) {
	var b bytes.Buffer
	if err := nb.Write(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// tree builds the on-disk JSON tree: the same shape nbformat's split_lines + strip_transient produce.
func (nb *Notebook) tree() map[string]any {
	meta := make(map[string]any, len(nb.Metadata))
	for k, v := range nb.Metadata {
		switch k {
		case "orig_nbformat", "orig_nbformat_minor", "signature":
			continue
		}
		meta[k] = v
	}
	cells := make([]any, len(nb.Cells))
	for i := range nb.Cells {
		cells[i] = nb.Cells[i].tree()
	}
	return map[string]any{
		"metadata":       meta,
		"nbformat":       nb.Nbformat,
		"nbformat_minor": nb.NbformatMinor,
		"cells":          cells,
	}
}

func (c *Cell) tree() map[string]any {
	meta := make(map[string]any, len(c.Metadata))
	for k, v := range c.Metadata {
		if k != "trusted" {
			meta[k] = v
		}
	}
	t := map[string]any{
		"cell_type": c.CellType,
		"metadata":  meta,
		"source":    splitLines(c.Source),
	}
	if c.ID != "" {
		t["id"] = c.ID
	}
	if c.CellType == CellCode {
		t["execution_count"] = intOrNil(c.ExecutionCount)
		outs := make([]any, len(c.Outputs))
		for i := range c.Outputs {
			outs[i] = c.Outputs[i].tree()
		}
		t["outputs"] = outs
	} else if c.Attachments != nil {
		att := make(map[string]any, len(c.Attachments))
		for name, b := range c.Attachments {
			att[name] = splitBundle(b)
		}
		t["attachments"] = att
	}
	return t
}

func (o *Output) tree() map[string]any {
	t := map[string]any{"output_type": o.OutputType}
	switch o.OutputType {
	case OutputStream:
		t["name"] = o.Name
		t["text"] = splitLines(o.Text)
	case OutputDisplayData, OutputExecuteResult:
		t["data"] = splitBundle(o.Data)
		meta := o.Metadata
		if meta == nil {
			meta = map[string]any{}
		}
		t["metadata"] = meta
		if o.OutputType == OutputExecuteResult {
			t["execution_count"] = intOrNil(o.ExecutionCount)
		}
	case OutputError:
		t["ename"] = o.Ename
		t["evalue"] = o.Evalue
		tb := make([]any, len(o.Traceback))
		for i, l := range o.Traceback {
			tb[i] = l
		}
		t["traceback"] = tb
	default:
		// Not an nbformat output; write what we hold rather than drop it.
		if o.Name != "" {
			t["name"] = o.Name
		}
		if o.Data != nil {
			t["data"] = splitBundle(o.Data)
		}
	}
	return t
}

func splitBundle(b MimeBundle) map[string]any {
	m := make(map[string]any, len(b))
	for k, v := range b {
		if s, ok := v.(string); ok && splitMime(k) {
			m[k] = splitLines(s)
		} else {
			m[k] = v
		}
	}
	return m
}

func intOrNil(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// WriteFileAtomic replaces path with nb so that a crash at any moment leaves either the old file or
// the new one, never a torn one: a temp file in the same directory, fsync, rename, fsync of the dir.
func WriteFileAtomic(path string, nb *Notebook) error {
	if err := nb.Check(); err != nil {
		return err
	}
	b, err := nb.Bytes()
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}

func writeFileAtomic(path string, data []byte) error {
	if err := atomicfile.Write(path, data); err != nil {
		return fmt.Errorf("notebooks: %w", err)
	}
	return nil
}

// NewCellID returns a fresh cell id in nbformat's style: the first 8 hex digits of a uuid4.
func NewCellID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

var cellIDPattern = regexp.MustCompile(`^[a-zA-Z0-9-_]{1,64}$`)

// New returns an empty nbformat 4.5 notebook.
func New() *Notebook {
	return &Notebook{Metadata: map[string]any{}, Nbformat: 4, NbformatMinor: 5, Cells: []Cell{}}
}

// AppendCell adds c, giving it a fresh id unique in nb when it has none (or a clashing one), and
// empty metadata and outputs where nbformat requires the keys.
func (nb *Notebook) AppendCell(c Cell) *Cell {
	nb.Upgrade()
	used := make(map[string]bool, len(nb.Cells))
	for i := range nb.Cells {
		used[nb.Cells[i].ID] = true
	}
	for c.ID == "" || used[c.ID] || !cellIDPattern.MatchString(c.ID) {
		c.ID = NewCellID()
	}
	if c.Metadata == nil {
		c.Metadata = map[string]any{}
	}
	if c.CellType == CellCode && c.Outputs == nil {
		c.Outputs = []Output{}
	}
	nb.Cells = append(nb.Cells, c)
	return &nb.Cells[len(nb.Cells)-1]
}

// Upgrade brings an nbformat 4.0-4.4 notebook to 4.5 as nbformat's upgrade does: every cell gets a
// unique id. Appending to an older notebook upgrades it first, since 4.4 forbids ids.
func (nb *Notebook) Upgrade() {
	if nb.Nbformat != 4 || nb.NbformatMinor >= 5 {
		return
	}
	used := map[string]bool{}
	for i := range nb.Cells {
		id := nb.Cells[i].ID
		for id == "" || used[id] || !cellIDPattern.MatchString(id) {
			id = NewCellID()
		}
		nb.Cells[i].ID = id
		used[id] = true
	}
	nb.NbformatMinor = 5
}

// Check reports the nbformat 4.5 rules the writer cannot enforce by itself: known cell types, valid
// and unique cell ids (4.5+), code-only outputs.
func (nb *Notebook) Check() error {
	if nb.Nbformat != 4 {
		return fmt.Errorf("%w: nbformat %d", ErrFormat, nb.Nbformat)
	}
	seen := make(map[string]int, len(nb.Cells))
	for i, c := range nb.Cells {
		switch c.CellType {
		case CellCode, CellMarkdown, CellRaw:
		default:
			return fmt.Errorf("%w: cell %d: unknown cell_type %q", ErrFormat, i, c.CellType)
		}
		if nb.NbformatMinor >= 5 {
			if !cellIDPattern.MatchString(c.ID) {
				return fmt.Errorf("%w: cell %d: invalid id %q", ErrFormat, i, c.ID)
			}
			if j, dup := seen[c.ID]; dup {
				return fmt.Errorf("%w: cells %d and %d share id %q", ErrFormat, j, i, c.ID)
			}
			seen[c.ID] = i
		}
		if c.CellType != CellCode && len(c.Outputs) > 0 {
			return fmt.Errorf("%w: cell %d: a %s cell has outputs", ErrFormat, i, c.CellType)
		}
		for j, o := range c.Outputs {
			switch o.OutputType {
			case OutputStream, OutputDisplayData, OutputExecuteResult, OutputError:
			default:
				return fmt.Errorf("%w: cell %d output %d: unknown output_type %q", ErrFormat, i, j, o.OutputType)
			}
		}
	}
	return nil
}
