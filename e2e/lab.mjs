// Drives JupyterLab (served by `jupyter lab --gateway-url=<pyrualean gateway>`) in Debian's headless
// Chromium: for each case, open the notebook, run its first cell, and wait for the expected output.
//
// Environment: LAB_URL, LAB_TOKEN, CASES (JSON list of {path, expect}), ARTIFACTS (dir for failure
// screenshots, optional), CHROMIUM (default /usr/bin/chromium). Exit 0 when every case showed its output.
// Never downloads a browser: playwright-core only drives the one given.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const labURL = process.env.LAB_URL;
const token = process.env.LAB_TOKEN ?? "";
const cases = JSON.parse(process.env.CASES ?? "[]");
const artifacts = process.env.ARTIFACTS ?? "";
const timeout = Number(process.env.CASE_TIMEOUT_MS ?? 120000);
if (!labURL || cases.length === 0) {
  console.error("lab.mjs: set LAB_URL and CASES");
  process.exit(2);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
  ],
});

let failed = 0;
try {
  for (const c of cases) {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const consoleLines = [];
    page.on("console", (m) => consoleLines.push(`${m.type()}: ${m.text()}`));
    page.on("pageerror", (e) => consoleLines.push(`pageerror: ${e.message}`));
    const started = Date.now();
    try {
      const url = `${labURL}/lab/tree/${c.path}?token=${encodeURIComponent(token)}&reset`;
      await page.goto(url, { waitUntil: "domcontentloaded", timeout });
      // The notebook panel, then its kernel: Lab shows the kernel name once the session is connected.
      const cell = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell").first();
      await cell.waitFor({ state: "visible", timeout });
      // Wait for the kernel to be connected and idle (status bar "<kernel> | Idle"); a cell run before the
      // session has its kernel makes Lab ask for a kernel instead of running.
      await page
        .locator(".jp-StatusBar-Widget", { hasText: /\| Idle/ })
        .first()
        .waitFor({ state: "visible", timeout })
        .catch(() => {});
      const out = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output", { hasText: c.expect }).first();
      const deadline = Date.now() + timeout;
      for (let attempt = 1; ; attempt++) {
        if (Date.now() > deadline) throw new Error(`no output ${JSON.stringify(c.expect)} after ${attempt - 1} runs`);
        await cell.locator(".jp-InputArea-editor").click();
        await page.keyboard.press("Control+Enter"); // run the cell, stay on it
        // If Lab still asks which kernel to use, take the preferred one (our gateway's pyrualean).
        const accept = page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept");
        if (await accept.waitFor({ state: "visible", timeout: 2000 }).then(() => true, () => false)) {
          console.log(`  ${c.path}: Lab asked for a kernel (attempt ${attempt}); selecting the preferred one`);
          await accept.click();
          continue;
        }
        const seen = await out.waitFor({ state: "visible", timeout: 30000 }).then(() => true, () => false);
        if (seen) break;
      }
      console.log(`ok ${c.path}: saw ${JSON.stringify(c.expect)} after ${Date.now() - started} ms`);
    } catch (err) {
      failed++;
      console.log(`FAIL ${c.path}: ${err.message.split("\n")[0]}`);
      const outputs = await page.locator(".jp-OutputArea-output").allInnerTexts().catch(() => []);
      console.log(`  outputs on the page: ${JSON.stringify(outputs)}`);
      console.log(`  browser console (last 20):\n    ${consoleLines.slice(-20).join("\n    ")}`);
      if (artifacts) {
        mkdirSync(artifacts, { recursive: true });
        await page.screenshot({ path: join(artifacts, c.path.replaceAll("/", "_") + ".png") }).catch(() => {});
      }
    }
    await page.close();
  }
} finally {
  await browser.close();
}
console.log(`${cases.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
