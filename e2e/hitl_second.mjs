// A person's JupyterLab while a second episode is live (issue #28; cmd/pyrualean/hitl_second_test.go), in
// Debian's headless Chromium: the Launcher has no card for the episode's live kernel; a new notebook's
// kernel dialog does not preselect it; an earlier episode's notebook is never silently on the live
// episode's kernel (the bar says so, and a fresh pyrualean kernel is one click); the live episode's own
// notebook is its.
//
// Environment: LAB_URL, LAB_TOKEN, OLD_PATH (the earlier episode's notebook), LIVE_PATH (the live
// episode's document), ARTIFACTS (screenshots), CHROMIUM, STEP_TIMEOUT_MS. Exit 0 when every step passed.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const labURL = process.env.LAB_URL;
const token = process.env.LAB_TOKEN ?? "";
const oldPath = process.env.OLD_PATH;
const livePath = process.env.LIVE_PATH;
const artifacts = process.env.ARTIFACTS ?? "";
const timeout = Number(process.env.STEP_TIMEOUT_MS ?? 60000);
if (!labURL || !oldPath || !livePath) {
  console.error("hitl_second.mjs: set LAB_URL, OLD_PATH and LIVE_PATH");
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
const auth = { headers: { Authorization: `token ${token}` } };
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
    console.log(`  episode bar: ${await bar.innerText().catch(() => "?")}`);
    console.log(`  browser console (last 15):\n    ${consoleLines.slice(-15).join("\n    ")}`);
    await shot(`FAIL-${name}`);
    await browser.close();
    process.exit(1);
  }
  console.log(`ok ${name} (${Date.now() - t0} ms)`);
  await shot(name);
};
const liveKernel = async () => {
  const eps = await (await page.request.get(`${labURL}/pyrualean/api/episodes`, auth)).json();
  if (!eps.episodes?.length) throw new Error(`no live episode: ${JSON.stringify(eps)}`);
  return eps.episodes[0].kernel_id;
};
const sessionKernel = async (path) => {
  const ss = await (await page.request.get(`${labURL}/api/sessions`, auth)).json();
  return ss.find((s) => s.path === path)?.kernel?.id ?? null;
};
// The Select Kernel dialog, if Lab shows one: its preselected option.
const kernelDialog = async (ms) => {
  const d = page.locator(".jp-Dialog");
  try {
    await d.first().waitFor({ state: "visible", timeout: ms });
  } catch {
    return null;
  }
  return await d.first().evaluate((n) => {
    const sel = n.querySelector("select");
    return { title: n.querySelector(".jp-Dialog-header")?.textContent ?? "", selected: sel ? sel.options[sel.selectedIndex]?.textContent ?? "" : "" };
  });
};

// Kernel › Change Kernel…, the live episode's kernel picked, as a person would.
const changeToLiveKernel = async () => {
  await page.locator(".lm-MenuBar-itemLabel", { hasText: /^Kernel$/ }).click();
  await page.locator(".lm-Menu-itemLabel", { hasText: /^Change Kernel/ }).first().click();
  const sel = page.locator(".jp-Dialog select").first();
  await sel.waitFor({ state: "visible", timeout });
  const liveOption = await sel.evaluate((n) => [...n.options].find((o) => /live agent kernel/.test(o.textContent))?.value ?? null);
  if (!liveOption) throw new Error("the dialog offers no live kernel");
  await sel.selectOption(liveOption);
  await page.locator(".jp-Dialog .jp-mod-accept").first().click();
};

await step("launcher-has-no-live-card", async () => {
  await page.goto(`${labURL}/lab?reset&token=${encodeURIComponent(token)}`, { waitUntil: "domcontentloaded", timeout });
  await page.locator(".jp-LauncherCard").first().waitFor({ state: "visible", timeout });
  await page.waitForFunction(() => document.querySelectorAll('.jp-LauncherCard[data-pyrualean-live="true"]').length > 0, null, { timeout: 15000 });
  const shown = await page.locator(".jp-LauncherCard", { hasText: /live agent kernel/ }).evaluateAll((cs) => cs.filter((c) => c.offsetParent !== null).length);
  if (shown) throw new Error(`${shown} Launcher cards for the live kernel are visible`);
});

await step("new-notebook-not-on-live-kernel", async () => {
  await page.locator(".lm-MenuBar-itemLabel", { hasText: /^File$/ }).click();
  await page.locator(".lm-Menu-itemLabel", { hasText: /^New$/ }).first().hover();
  await page.locator(".lm-Menu-itemLabel", { hasText: /^Notebook$/ }).first().click();
  const d = await kernelDialog(8000);
  console.log(`  new notebook kernel dialog: ${JSON.stringify(d)}`);
  if (d && /live agent kernel/.test(d.selected)) throw new Error(`the dialog preselects the live kernel: ${d.selected}`);
  if (d) await page.keyboard.press("Enter");
  await page.locator(`${P}`).first().waitFor({ state: "visible", timeout });
  await page.waitForTimeout(2000);
  const status = await page.locator(".jp-StatusBar-Widget").allInnerTexts();
  if (status.some((s) => /live agent kernel/.test(s))) throw new Error(`the new notebook is on the live kernel: ${status}`);
});

// The plain path: a person's own new notebook put on the live kernel by hand ("Connect to Existing
// Kernel" / Change Kernel): its bar says whose kernel it is and offers the episode's live notebook.
await step("plain-path-offers-live-notebook", async () => {
  await changeToLiveKernel();
  const open = page.locator(`${P} .pyrualean-open-live`);
  await open.waitFor({ state: "visible", timeout });
  const text = await bar.innerText();
  if (!/Episode b/.test(text)) throw new Error(`the bar says ${JSON.stringify(text)}`);
  await open.click();
  await page.waitForFunction((path) => {
    const tab = document.querySelector(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current");
    const b = document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .pyrualean-episode-bar");
    return tab && tab.textContent.includes(path.split("/").pop()) && b && b.dataset.episode === "b";
  }, livePath, { timeout });
});

await step("old-notebook-not-silently-bound", async () => {
  await page.goto(`${labURL}/lab/tree/${oldPath}?token=${encodeURIComponent(token)}&reset`, { waitUntil: "domcontentloaded", timeout });
  await page.locator(`${P} .jp-Cell`).first().waitFor({ state: "visible", timeout });
  const d = await kernelDialog(8000);
  console.log(`  old notebook kernel dialog: ${JSON.stringify(d)}`);
  if (d) await page.keyboard.press("Enter"); // as the person did
  const live = await liveKernel();
  // Either it is not on the live kernel, or the bar and a dialog say so.
  const deadline = Date.now() + 20000;
  let on = null;
  while (Date.now() < deadline) {
    on = await sessionKernel(oldPath);
    if (on === live) break;
    await page.waitForTimeout(500);
  }
  if (on === live) {
    await page.waitForFunction(() => document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .pyrualean-episode-bar")?.dataset.state === "wrong-episode",
      null, { timeout: 10000 });
    const q = page.locator(".jp-Dialog", { hasText: "This notebook is not the live episode’s" });
    await q.waitFor({ state: "visible", timeout: 10000 });
    await shot("old-notebook-asked");
    await q.getByRole("button", { name: "Use a fresh pyrualean kernel" }).click();
    const until = Date.now() + 30000;
    while (Date.now() < until && (await sessionKernel(oldPath)) === live) await page.waitForTimeout(500);
    if ((await sessionKernel(oldPath)) === live) throw new Error("still on the live kernel after choosing a fresh one");
    console.log("  the old notebook was on the live kernel: said and changed to a fresh one");
  } else {
    console.log(`  the old notebook is on kernel ${on}, not the live one`);
  }
});

await step("old-notebook-put-on-live-kernel-is-told", async () => {
  // The person picks the live episode's kernel for the old notebook on purpose (Kernel › Change Kernel…):
  // the bar and a dialog say whose notebook it is; a fresh pyrualean kernel is one click.
  const live = await liveKernel();
  await changeToLiveKernel();
  await page.waitForFunction(() => document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .pyrualean-episode-bar")?.dataset.state === "wrong-episode",
    null, { timeout });
  const text = await bar.innerText();
  if (!/Not this episode’s notebook/.test(text)) throw new Error(`bar says ${JSON.stringify(text)}`);
  const q = page.locator(".jp-Dialog", { hasText: "This notebook is not the live episode’s" });
  await q.waitFor({ state: "visible", timeout: 10000 });
  await shot("old-notebook-asked");
  await q.getByRole("button", { name: "Use a fresh pyrualean kernel" }).click();
  const until = Date.now() + 30000;
  while (Date.now() < until && (await sessionKernel(oldPath)) === live) await page.waitForTimeout(500);
  if ((await sessionKernel(oldPath)) === live) throw new Error("still on the live kernel after choosing a fresh one");
  await page.waitForFunction(() => document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .pyrualean-episode-bar")?.dataset.state !== "wrong-episode",
    null, { timeout: 10000 }).catch(() => {});
});

await step("live-notebook-is-its-own", async () => {
  await page.goto(`${labURL}/lab/tree/${livePath}?token=${encodeURIComponent(token)}&reset`, { waitUntil: "domcontentloaded", timeout });
  await page.locator(`${P} .jp-Cell`).first().waitFor({ state: "visible", timeout });
  await page.waitForFunction(() => {
    const b = document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden) .pyrualean-episode-bar");
    return b && b.dataset.state === "running" && b.offsetParent !== null;
  }, null, { timeout });
});

// Lab's own news prompt is off (labconfig/page_config.d): it would sit over the bar's toasts for every person.
await step("no-news-prompt", async () => {
  await page.waitForTimeout(1500);
  if (await page.getByText("notified about official Jupyter news").count()) throw new Error("Lab asks about Jupyter news");
});

await browser.close();
console.log("all steps passed");
