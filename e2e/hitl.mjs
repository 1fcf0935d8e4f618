// A person in JupyterLab with a live agent (issue #18), in Debian's headless Chromium: the episode's
// live notebook (attached by the Go test, cmd/pyrualean/hitl_lab_test.go) is opened; agent cells must
// appear without a reload; the person pauses while the model decides (the agent is held within a
// second, the bar says which turn and that the budget stopped, Pause looks pressed) and resumes; pauses
// from the toolbar, runs a cell that waits behind the agent's
// (a notice says so), runs a cell that moves the robot, is told the gateway refused a restart, steps,
// resumes, reloads in the middle of a streaming agent cell and must find every line, then sees the
// episode end and linger, works in the kept kernel, and sees the gateway go without a cell hanging.
// On the way: a held cell's code is shown in full above the notebook (not under it), through a pause
// longer than the episode's whole budget and a reload; Step runs it; a second held cell is discarded.
//
// Environment: LAB_URL, LAB_TOKEN, NB_PATH (the live notebook), ARTIFACTS (screenshots of every step),
// CHROMIUM (default /usr/bin/chromium), STEP_TIMEOUT_MS. Lines starting with "@@" are for the Go test:
// "@@ready" (release the agent), "@@latency <json>", "@@hold <json>". Exit 0 when every step passed.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const labURL = process.env.LAB_URL;
const token = process.env.LAB_TOKEN ?? "";
const nbPath = process.env.NB_PATH;
const artifacts = process.env.ARTIFACTS ?? "";
const timeout = Number(process.env.STEP_TIMEOUT_MS ?? 90000);
if (!labURL || !nbPath) {
  console.error("hitl.mjs: set LAB_URL and NB_PATH");
  process.exit(2);
}
if (artifacts) mkdirSync(artifacts, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
});
const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
const consoleLines = [];
page.on("console", (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
page.on("pageerror", (e) => consoleLines.push(`pageerror: ${e.message}`));

// First time each streamed line "<kind> <i> <unix seconds>" is seen on the page, per page load.
await page.addInitScript(() => {
  window.__seen = {};
  const scan = () => {
    for (const el of document.querySelectorAll(".jp-OutputArea-output")) {
      for (const m of el.textContent.matchAll(/(tick|beat|own|slow) (\d+) (\d+\.\d+)/g)) {
        const k = `${m[1]} ${m[2]}`;
        if (!(k in window.__seen)) window.__seen[k] = { sent: parseFloat(m[3]) * 1000, seen: Date.now() };
      }
    }
  };
  new MutationObserver(scan).observe(document, { subtree: true, childList: true, characterData: true });
});

const P = ".jp-NotebookPanel:not(.lm-mod-hidden)";
const bar = page.locator(`${P} .pyrualean-episode-bar`);
let shots = 0;
const shot = async (name) => {
  if (!artifacts) return;
  shots++;
  await page.screenshot({ path: join(artifacts, `${String(shots).padStart(2, "0")}-${name}.png`) }).catch(() => {});
};
const step = async (name, fn) => {
  const t0 = Date.now();
  try {
    await fn();
  } catch (err) {
    console.log(`FAIL ${name}: ${err.message.split("\n")[0]}`);
    const outs = await page.locator(`${P} .jp-Cell`).allInnerTexts().catch(() => []);
    console.log(`  cells on the page: ${JSON.stringify(outs).slice(0, 4000)}`);
    console.log(`  episode bar: ${await bar.innerText().catch(() => "?")} ${JSON.stringify(await bar.evaluate((n) => ({ ...n.dataset })).catch(() => ({})))}`);
    console.log(`  browser console (last 25):\n    ${consoleLines.slice(-25).join("\n    ")}`);
    await shot(`FAIL-${name}`);
    await browser.close();
    process.exit(1);
  }
  console.log(`ok ${name} (${Date.now() - t0} ms)`);
  await shot(name);
};
const output = (text) => page.locator(`${P} .jp-OutputArea-output`, { hasText: text }).first();
const waitOutput = (text, t = timeout) => output(text).waitFor({ state: "visible", timeout: t });
const waitBar = (attr, value, t = timeout) =>
  page.waitForFunction(([a, v]) => {
    const b = document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .pyrualean-episode-bar");
    return b && b.dataset[a] === v && b.offsetParent !== null;
  }, [attr, value], { timeout: t });
const click = (action) => page.locator(`${P} .jp-Toolbar .pyrualean-${action}`).first().click();
const api = async () => {
  const r = await page.request.get(`${labURL}/pyrualean/api/episodes`, { headers: { Authorization: `token ${token}` } });
  return (await r.json()).episodes[0];
};
const barText = () => bar.innerText();
// The held cell: its code visible, inside the bar, and the bar above the notebook's cells.
const heldVisible = async (code) => {
  const pre = page.locator(`${P} .pyrualean-held-code`, { hasText: code });
  await pre.waitFor({ state: "visible", timeout });
  const b = await bar.boundingBox();
  const p = await pre.boundingBox();
  const nb = await page.locator(`${P} .jp-NotebookPanel-notebook`).boundingBox();
  if (!b || !p || !nb) throw new Error("no boxes");
  if (b.height < 60 || p.y + p.height > b.y + b.height + 1 || b.y + b.height > nb.y + 1) {
    throw new Error(`the held cell is not drawn in the bar above the notebook: bar ${JSON.stringify(b)} code ${JSON.stringify(p)} notebook ${JSON.stringify(nb)}`);
  }
  for (const a of ["step", "discard", "edit"]) {
    if (!(await page.locator(`${P} .pyrualean-held-${a}`).isVisible())) throw new Error(`no ${a} button by the held cell`);
  }
};
const pressed = async (on) => {
  const n = await page.locator(`${P} .jp-Toolbar .pyrualean-pressed .pyrualean-pause`).count();
  if ((n > 0) !== on) throw new Error(`the Pause button ${on ? "does not look" : "looks"} pressed`);
};

// A person's new cell below the last one, run in place (Ctrl+Enter).
const runNewCell = async (code) => {
  const last = page.locator(`${P} .jp-Notebook .jp-Cell`).last();
  await last.locator(".jp-InputPrompt").first().click();
  await page.keyboard.press("Escape");
  await page.keyboard.press("b");
  const cell = page.locator(`${P} .jp-Notebook .jp-Cell.jp-mod-selected`).first();
  await cell.locator(".jp-InputArea-editor").click();
  await page.keyboard.insertText(code); // at once: no key-by-key delay, no auto-closed brackets
  await page.keyboard.press("Control+Enter");
  return cell;
};
const openNotebook = async () => {
  await page.goto(`${labURL}/lab/tree/${nbPath}?token=${encodeURIComponent(token)}&reset`, { waitUntil: "domcontentloaded", timeout });
  await page.locator(`${P} .jp-Cell`).first().waitFor({ state: "visible", timeout });
  await bar.waitFor({ state: "visible", timeout });
};

await step("open-live-notebook", async () => {
  await openNotebook();
  await page.locator(".jp-StatusBar-Widget", { hasText: /\| Idle|\| Busy/ }).first().waitFor({ state: "visible", timeout });
});
console.log("@@ready");

await step("agent-cells-appear", async () => {
  await waitOutput("agent cell 1");
});

// The agent is a collaborator as a second person would be: its named cursor (jupyter-collaboration's
// remote cursor, the agent's colour) on the cell it ran, and an entry in the Collaborators panel.
await step("agent-is-a-collaborator", async () => {
  const cell = page.locator(`${P} .jp-Cell`, { hasText: "print('agent cell 1')" }).last();
  // The cursor is in the cell's editor; its name flag is a CodeMirror tooltip (placed by the editor).
  await cell.locator(".jp-remote-cursor").first().waitFor({ state: "attached", timeout: 30000 });
  const flag = page.locator(".jp-remote-userFlag-name").first();
  await flag.waitFor({ state: "attached", timeout: 10000 });
  const name = await flag.textContent();
  if (!/^Agent · scripted \(episode run\)$/.test(name ?? "")) throw new Error(`the cursor is named ${JSON.stringify(name)}`);
  // The agent's cell (non-ASCII, markup) is text: nothing of it ran in the page, the server still serves.
  if (await page.evaluate(() => window.__pwned)) throw new Error("the agent's cell markup ran in the person's page");
  await page.locator('.lm-TabBar-tab[data-id="jp-collaboration-panel"]').first().click();
  const entry = page.locator(".jp-CollaboratorsList", { hasText: "Agent · scripted" }).first();
  await entry.waitFor({ state: "visible", timeout: 15000 });
  await shot("agent-in-collaborators");
  await page.locator('.lm-TabBar-tab[data-id="jp-collaboration-panel"]').first().click(); // closed again
});

// The scripted model takes minutes over turn 2, HOLDS times over: each Pause cancels the call, each
// Resume asks again.
const HOLDS = Number(process.env.HOLDS ?? 5);
const holds = [];
for (let i = 0; i < HOLDS; i++) {
  await step(`pause-while-model-decides-${i + 1}`, async () => {
    await waitBar("phase", "thinking");
    await waitBar("turn", "2");
    await waitBar("state", "running");
    // Lab's status bar: the kernel shows busy while the agent thinks (the gateway says so), idle once held
    const kernelState = (s) => page.locator(".jp-StatusBar-Widget", { hasText: new RegExp(`\\| ${s}`) }).first().waitFor({ state: "visible", timeout: 5000 });
    if (i === 0) await kernelState("Busy");
    await page.waitForTimeout(300);
    const t0 = Date.now();
    await click("pause");
    await waitBar("phase", "waiting", 5000); // the model call was cancelled: the agent is held
    holds.push(Date.now() - t0);
    if (i === 0) await kernelState("Idle");
    const text = await barText();
    if (!/turn 2\b/.test(text) || !/budget left .* \(stopped while paused\)/.test(text)) throw new Error(`bar says ${JSON.stringify(text)}`);
    await pressed(true);
  });
  await step(`resume-asks-again-${i + 1}`, async () => {
    await click("resume");
    await waitBar("state", "running");
    await pressed(false);
  });
}
await step("agent-goes-on", async () => {
  await waitOutput("tick 1 ");
});

await step("pause-from-toolbar", async () => {
  await click("pause"); // during agent cell 2: the agent stops before its next decision
  await waitBar("state", "paused");
});

await step("queued-behind-agent", async () => {
  await runNewCell("h = 'hello from a person'; import time\nfor i in range(8): print(f'own {i} {time.time():.3f}', flush=True); time.sleep(0.25)");
  await page.getByText(/queued behind agent cell 2/).first().waitFor({ state: "visible", timeout });
  await waitOutput("own 7 ");
  await waitBar("phase", "waiting");
});

await step("human-moves-robot", async () => {
  await runNewCell("m = robo.move_to([0.5, 0.05, 0.3]); print('person moved', robo.state().step > 0)");
  await waitOutput("person moved True");
  await page.waitForFunction(() => document.querySelectorAll(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell.pyrualean-human-cell").length >= 2,
    null, { timeout: 10000 });
  // The motion's images (on-motion) say which camera each is from.
  await page.waitForFunction(() => {
    const cells = document.querySelectorAll(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell.pyrualean-human-cell");
    const cams = [...cells[cells.length - 1].querySelectorAll(".jp-OutputArea-output[data-pyrualean-camera]")].map((o) => o.dataset.pyrualeanCamera);
    return cams.includes("agentview") && cams.includes("wrist");
  }, null, { timeout: 10000 });
});

await step("refused-restart-shown", async () => {
  // Lab's restart, as its Kernel menu sends it: the gateway refuses (it would lose the robot), and
  // the bar's extension says so instead of nothing.
  const eps = await (await page.request.get(`${labURL}/pyrualean/api/episodes`, { headers: { Authorization: `token ${token}` } })).json();
  const kid = eps.episodes[0].kernel_id;
  const r = await page.request.post(`${labURL}/api/kernels/${kid}/restart`, { headers: { Authorization: `token ${token}` } });
  if (r.ok()) throw new Error(`restart of the episode's kernel answered ${r.status()}`);
  await page.getByText(/The gateway refused to restart the episode’s kernel: restarting it would lose the robot/).first().waitFor({ state: "visible", timeout });
});

await step("step", async () => {
  await click("step"); // one decision: agent cell 3, then paused again
  await waitOutput("agent cell 3 sees hello from a person");
  await waitOutput("beat 15 ");
  await waitBar("turn", "4"); // the agent's next call is turn 4
  await waitBar("phase", "waiting");
});

const before = await page.evaluate(() => window.__seen);

await step("resume", async () => {
  await click("resume");
  await waitBar("state", "running");
  await waitOutput("slow 1 ");
  await click("pause"); // during the slow cell: the reply's next cell will be held
  await waitBar("state", "paused");
});

await step("reload-mid-cell", async () => {
  await page.reload({ waitUntil: "domcontentloaded", timeout });
  await page.locator(`${P} .jp-Cell`).first().waitFor({ state: "visible", timeout });
  await waitOutput("slow 11 ");
  // textContent: a cell scrolled out of view has no innerText where Lab defers rendering off-screen cells
  const text = await output("slow 0 ").evaluate((e) => e.textContent);
  const got = [...text.matchAll(/slow (\d+) /g)].map((m) => Number(m[1]));
  const want = [...Array(12).keys()];
  if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error(`after the reload the cell shows slow ${got}, want ${want}`);
  for (const t of ["agent cell 1", "tick 11 ", "own 7 ", "person moved True", "agent cell 3 sees"]) {
    if (!(await output(t).isVisible())) throw new Error(`after the reload ${JSON.stringify(t)} is gone`);
  }
});

let heldAt = 0;
let budgetAtHold = null;
await step("held-cell-shown", async () => {
  await waitBar("phase", "held");
  heldAt = Date.now();
  await heldVisible("print('held cell ran', 6 * 7)");
  const ep = await api();
  budgetAtHold = ep.budget_left_s;
  if (!ep.budget_s || budgetAtHold == null) throw new Error(`no budget in the status: ${JSON.stringify(ep)}`);
  const text = await barText();
  if (!/turn 5\b/.test(text)) throw new Error(`bar says ${JSON.stringify(text)} while cell 5 is held`);
});

await step("reload-while-held", async () => {
  await page.reload({ waitUntil: "domcontentloaded", timeout });
  await page.locator(`${P} .jp-Cell`).first().waitFor({ state: "visible", timeout });
  await waitBar("phase", "held");
  await heldVisible("print('held cell ran', 6 * 7)");
  await pressed(true);
});

await step("pause-longer-than-budget", async () => {
  const ep = await api();
  const until = heldAt + ep.budget_s * 1000 + 3000;
  while (Date.now() < until) {
    await page.waitForTimeout(Math.min(5000, until - Date.now()));
    const now = await api();
    if (now.state !== "paused" || now.phase !== "held") throw new Error(`the held episode went ${now.state}/${now.phase}`);
  }
  const after = await api();
  if (Math.abs(after.budget_left_s - budgetAtHold) > 1) throw new Error(`budget left ${budgetAtHold} → ${after.budget_left_s} while paused`);
  if (after.paused_s < ep.budget_s) throw new Error(`paused_s ${after.paused_s} < budget ${ep.budget_s}`);
});

await step("step-runs-held-cell", async () => {
  await page.locator(`${P} .pyrualean-held-step`).click();
  await waitOutput("held cell ran 42");
  await waitBar("phase", "waiting");
});

// Resume until the agent's next cell prints `shown`, pause, and wait for its second cell, `code`, held.
const holdNext = async (shown, code) => {
  await click("resume");
  await waitOutput(shown);
  await click("pause");
  await waitBar("phase", "held");
  await heldVisible(code);
};

await step("discard-held-cell", async () => {
  await holdNext("pre-discard", "print('discarded', 'cell')");
  await page.locator(`${P} .pyrualean-held-discard`).click();
  await waitBar("phase", "waiting");
  if (await output("discarded cell").isVisible()) throw new Error("the discarded cell ran");
});

// Edit as mine: the held cell is discarded and its code becomes the person's new cell, in edit mode at
// the end; changed and run, it is the person's (counted as theirs), and the agent's version never runs.
// The agent's code carries markup meant to run in the person's page: it stays text, in the bar and the cell.
await step("edit-held-as-mine", async () => {
  await holdNext("pre-edit", "print('taken', 'over')");
  const humansBefore = (await api()).human_cells ?? 0;
  await page.locator(`${P} .pyrualean-held-edit`).click();
  await waitBar("phase", "waiting");
  const cell = page.locator(`${P} .jp-Notebook .jp-Cell.jp-mod-active`).first();
  await cell.locator(".jp-InputArea-editor", { hasText: "print('taken', 'over')" }).waitFor({ state: "visible", timeout });
  const last = await page.locator(`${P} .jp-Notebook .jp-Cell`).last().innerText();
  if (!last.includes("print('taken', 'over')")) throw new Error(`the new cell is not the last one: ${JSON.stringify(last)}`);
  const editing = await page.evaluate(() => !!document.activeElement?.closest(".jp-Cell.jp-mod-active .jp-InputArea-editor"));
  if (!editing) throw new Error("the new cell's editor does not have the focus");
  const source = await page.evaluate(() => {
    const nb = document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook");
    const cells = nb ? nb.querySelectorAll(".jp-Cell") : [];
    return cells.length ? cells[cells.length - 1].querySelector(".cm-content")?.textContent ?? "" : "";
  });
  if (!source.includes('<img src=x onerror="window.__pwned=1">')) throw new Error(`the new cell's code lost the agent's text: ${JSON.stringify(source)}`);
  if (await page.evaluate(() => window.__pwned === 1 || document.querySelector(".pyrualean-held img, .jp-Cell .jp-InputArea img") !== null)) {
    throw new Error("the agent's markup became part of the page");
  }
  await shot("edit-as-mine");
  await page.keyboard.press("Control+a");
  await page.keyboard.insertText("print('edited', 'by me')");
  await page.keyboard.press("Control+Enter");
  await waitOutput("edited by me");
  for (const until = Date.now() + timeout; ; ) {
    const ep = await api();
    if ((ep.human_cells ?? 0) === humansBefore + 1) break;
    if (Date.now() > until) throw new Error(`human_cells ${ep.human_cells}, want ${humansBefore + 1}`);
    await page.waitForTimeout(200);
  }
  if (await output("taken over").isVisible()) throw new Error("the agent's held cell ran");
});

await step("resume-to-the-end", async () => {
  await click("resume");
});

await step("episode-over-lingers", async () => {
  await waitBar("state", "over");
  const text = await bar.innerText();
  if (!/episode over/.test(text) || !/stays until/.test(text)) throw new Error(`bar says ${JSON.stringify(text)}`);
});

await step("post-mortem-cell", async () => {
  await runNewCell("print('post-mortem', robo.state().step > 0)");
  await waitOutput("post-mortem True");
});

await step("gateway-gone-no-hang", async () => {
  await waitBar("state", "gone", timeout);
  const cell = await runNewCell("print('never runs')");
  // The cell must not wait for ever: Lab says there is no kernel (a dialog) or clears its prompt.
  await page.waitForFunction(() => {
    const dialog = document.querySelector(".jp-Dialog");
    const cells = document.querySelectorAll(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell");
    const prompt = cells[cells.length - 1]?.querySelector(".jp-InputPrompt")?.textContent ?? "";
    return dialog !== null || !prompt.includes("*");
  }, null, { timeout: 30000 });
  if (await output("never runs").isVisible()) throw new Error("a cell ran with the gateway gone");
  void cell;
  // Lab's own dialog (no kernel to start), if it showed one: dismissed, as a person would.
  const ok = page.locator(".jp-Dialog .jp-mod-accept");
  if (await ok.count()) await ok.first().click();
  const text = await barText();
  if (!/none can run|cells run again once one is back/.test(text)) throw new Error(`the gone bar says ${JSON.stringify(text)}`);
  if (await page.locator(`${P} .pyrualean-fresh-kernel`).isVisible()) throw new Error("a fresh kernel is offered with no gateway to start it");
});
console.log("@@gone"); // the test serves a second episode on the same address now

const sessionKernel = async (path) => {
  const ss = await (await page.request.get(`${labURL}/api/sessions`, { headers: { Authorization: `token ${token}` } })).json();
  return ss.find((s) => s.path === path)?.kernel?.id ?? null;
};
const episodeTwo = async () => {
  const r = await page.request.get(`${labURL}/pyrualean/api/episodes`, { headers: { Authorization: `token ${token}` } });
  return ((await r.json()).episodes ?? []).find((e) => e.id === "two") ?? null;
};

// Lab stays open; a second episode is served where the first was: the old notebook is offered a fresh
// pyrualean kernel (one click), never the new episode's.
await step("gateway-back-offers-fresh-kernel", async () => {
  await waitBar("state", "gateway-back", 120000);
  await page.locator(`${P} .pyrualean-fresh-kernel`).click();
  await bar.waitFor({ state: "hidden", timeout });
  await runNewCell("print('fresh kernel', 6 * 7)");
  await waitOutput("fresh kernel 42", 60000);
  const two = await episodeTwo();
  const on = await sessionKernel(nbPath);
  if (!two || !on || on === two.kernel_id) throw new Error(`the old notebook is on kernel ${on}; episode two: ${JSON.stringify(two)}`);
});

await step("second-episode-in-same-lab", async () => {
  const r = await page.request.post(`${labURL}/pyrualean/api/episodes/two/live`, { headers: { Authorization: `token ${token}` }, data: {} });
  if (!r.ok()) throw new Error(`live: ${r.status()} ${await r.text()}`);
  const { path } = await r.json();
  await page.goto(`${labURL}/lab/tree/${path}?token=${encodeURIComponent(token)}&reset`, { waitUntil: "domcontentloaded", timeout });
  await waitOutput("episode two 42");
  await page.waitForFunction(() => {
    const b = document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .pyrualean-episode-bar");
    return b && b.dataset.episode === "two" && ["running", "paused", "over"].includes(b.dataset.state ?? "") && b.offsetParent !== null;
  }, null, { timeout });
  const flag = page.locator(".jp-remote-userFlag-name", { hasText: "episode two" });
  await flag.first().waitFor({ state: "attached", timeout: 30000 });
  if (await sessionKernel(nbPath) === (await episodeTwo())?.kernel_id) throw new Error("the first episode's notebook ended up on episode two's kernel");
});

// Delay from a line's print in the kernel to its first appearance in the page (first load only).
const lat = (kind) => Object.entries(before).filter(([k]) => k.startsWith(kind)).map(([, v]) => v.seen - v.sent).sort((a, b) => a - b);
const q = (xs, p) => (xs.length ? xs[Math.min(xs.length - 1, Math.floor(p * xs.length))] : null);
// beat: an agent cell while the page is left alone; tick: one while the person pauses, writes and runs a
// cell; own: the person's own cell (JupyterLab's kernel connection, no shared document): the anchor.
const stats = (xs) => ({ n: xs.length, median: q(xs, 0.5), p95: q(xs, 0.95), max: xs[xs.length - 1] ?? null });
const live = stats(lat("beat"));
const own = stats(lat("own"));
const ratio = (a, b) => (a !== null && b ? Math.round((100 * a) / b) / 100 : null);
console.log(`@@hold ${JSON.stringify({ click_to_bar_waiting_ms: holds })}`);
console.log(`@@latency ${JSON.stringify({
  agent_live_ms: live,
  agent_live_while_person_acts_ms: stats(lat("tick")),
  own_cell_ms: own,
  ratio_median: ratio(live.median, own.median),
  ratio_p95: ratio(live.p95, own.p95),
})}`);
await browser.close();
console.log("all steps passed");
