// pyrualean in JupyterLab: a notebook on a live episode's kernel gets an episode bar (state, turn,
// what the agent does, the held cell's code), Pause / Step / Resume in its toolbar, a notice when a
// person's cell is queued behind the agent's, the gateway's refusals as messages, and a visible tag on
// people's and the agent's cells. It talks to the server extension (pyrualean_lab), which talks to the
// gateway: GET /pyrualean/api/episodes, POST /pyrualean/api/episodes/{id}/{pause|step|resume}.
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { Dialog, Notification, showDialog, ToolbarButton } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { CodeCell, ICodeCellModel } from '@jupyterlab/cells';
import { INotebookTracker, NotebookActions, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

const POLL_MS = 1000;

interface CellInfo {
  turn: number;
  tool: string;
  code: string;
  msg_id?: string;
}

interface Refusal {
  at: string;
  action: string;
  reason: string;
  message: string;
}

interface Episode {
  id: string;
  kernel_id: string;
  state: 'running' | 'paused' | 'over';
  phase: 'thinking' | 'cell' | 'waiting' | 'held' | 'done';
  status: string;
  turns: number;
  turn?: number; // the call under way: decided, held or run (turns: the calls made)
  max_turns: number;
  budget_s?: number;
  budget_left_s?: number | null;
  paused_s?: number;
  human_cells: number;
  human_calls: number;
  human_env_steps: number;
  running_cell?: CellInfo;
  held_cell?: CellInfo;
  linger_until?: string;
  refusals?: Refusal[];
}

interface Listing {
  gateway: 'ok' | 'gone' | 'none';
  episodes: Episode[];
  live?: Record<string, string>; // live document path -> its episode id
  error?: string;
}

const PHASES: Record<string, string> = {
  thinking: 'the agent is deciding',
  cell: 'the agent runs a cell',
  waiting: 'paused before the agent’s next decision',
  held: 'paused: the agent’s next cell is held',
  done: 'the episode is over'
};

/** Seconds as m:ss (or h:mm:ss). */
const clock = (s: number): string => {
  const t = Math.max(0, Math.round(s));
  const h = Math.floor(t / 3600);
  const m = Math.floor((t % 3600) / 60);
  const ss = String(t % 60).padStart(2, '0');
  return h ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
};

/** Puts a notebook on a fresh pyrualean kernel; says why not when it cannot (false). */
async function useFreshKernel(panel: NotebookPanel): Promise<boolean> {
  const ctx = panel.sessionContext;
  try {
    try {
      await ctx.changeKernel({ name: 'pyrualean' });
    } catch (err) {
      // The notebook's session went with the episode's kernel (the server forgot both): Lab has dropped
      // it and said so in a dialog; with no session, a second try starts a new one.
      if (ctx.session) {
        throw err;
      }
      Dialog.flush();
      await ctx.changeKernel({ name: 'pyrualean' });
    }
    return true;
  } catch (err) {
    Notification.error(`Cannot start a pyrualean kernel: ${(err as Error).message}`, { autoClose: 8000 });
    return false;
  }
}

/** The episode bar and buttons of one notebook panel. */
class EpisodeView {
  readonly bar: Widget;
  private inner: HTMLElement;
  private text: HTMLElement;
  private heldBox: HTMLElement;
  private heldTitle: HTMLElement;
  private held: HTMLPreElement;
  private buttons: ToolbarButton[] = [];
  private pauseButton: ToolbarButton | null = null;
  private openLive: HTMLButtonElement;
  private fresh: HTMLButtonElement;
  isLive = true; // the notebook is the episode's live document (set by refresh)
  episode: Episode | null = null;
  wasOn = false; // the panel was on an episode's kernel (so a vanished episode is worth saying)
  seenRefusals = new Set<string>();
  private fitted = -1;

  constructor(private panel: NotebookPanel, act: (ep: Episode, action: string) => Promise<boolean>) {
    this.bar = new Widget();
    this.bar.addClass('pyrualean-episode-bar');
    // The bar sits in the panel's content header, a Lumino box that sizes it by its CSS min-height:
    // inner is measured and the bar's min-height follows it (fit), so the held cell is never drawn
    // under the notebook.
    this.inner = document.createElement('div');
    this.inner.className = 'pyrualean-episode-inner';
    this.text = document.createElement('span');
    this.text.className = 'pyrualean-episode-text';
    this.heldBox = document.createElement('div');
    this.heldBox.className = 'pyrualean-held';
    this.heldTitle = document.createElement('div');
    this.heldTitle.className = 'pyrualean-held-title';
    this.held = document.createElement('pre');
    this.held.className = 'pyrualean-held-code';
    const actions = document.createElement('div');
    actions.className = 'pyrualean-held-actions';
    for (const [action, label, tip] of [
      ['step', 'Step: run it', 'Run the held cell, then pause again'],
      ['discard', 'Discard', 'Do not run the held cell: the agent is told and decides again (still paused)'],
      ['edit', 'Edit as mine', 'Discard the held cell and put its code in a new cell of yours at the end, to change and run as your own (the agent is told of the discard and of what you run)']
    ]) {
      const b = document.createElement('button');
      b.className = `jp-Button jp-mod-styled pyrualean-held-${action}`;
      b.textContent = label;
      b.title = tip;
      b.onclick = async () => {
        if (!this.episode) {
          return;
        }
        if (action !== 'edit') {
          void act(this.episode, action);
          return;
        }
        // The code as shown when pressed: the cell the person chose to take over.
        const code = this.held.textContent ?? '';
        if (await act(this.episode, 'discard')) {
          this.addOwnCell(code);
        }
      };
      actions.append(b);
    }
    this.heldBox.append(this.heldTitle, this.held, actions);
    this.heldBox.style.display = 'none';
    // On the plain path ("Connect to Existing Kernel") a notebook is not the live document: offer it.
    this.openLive = document.createElement('button');
    this.openLive.className = 'jp-Button jp-mod-styled pyrualean-open-live';
    this.openLive.textContent = 'Open the live notebook';
    this.openLive.title = 'The episode’s live document: the agent’s cells as they run';
    this.openLive.style.display = 'none';
    this.openLive.onclick = () => {
      if (this.episode) {
        void act(this.episode, 'open-live');
      }
    };
    // After the end (post-mortem work away from the episode's robot), on another episode's kernel, and
    // once a gateway is back after the episode's went: a fresh pyrualean kernel, one click.
    this.fresh = document.createElement('button');
    this.fresh.className = 'jp-Button jp-mod-styled pyrualean-fresh-kernel';
    this.fresh.textContent = 'Use a fresh pyrualean kernel';
    this.fresh.title = 'Put this notebook on a new pyrualean kernel with a robot of its own, away from the episode’s';
    this.fresh.style.display = 'none';
    this.fresh.onclick = async () => {
      if (await useFreshKernel(this.panel)) {
        this.wasOn = false;
        this.hide();
      }
    };
    this.inner.append(this.text, this.openLive, this.fresh, this.heldBox);
    this.bar.node.append(this.inner);
    this.bar.hide();
    panel.contentHeader.addWidget(this.bar);
    for (const [action, label, tip] of [
      ['pause', 'Pause', 'Pause the agent before its next decision (a decision under way is cancelled and asked again)'],
      ['step', 'Step', 'Let the agent make one decision (or run its held cell), then pause again'],
      ['resume', 'Resume', 'Let the agent go on']
    ]) {
      const b = new ToolbarButton({
        className: `pyrualean-${action}`,
        label,
        tooltip: tip,
        onClick: () => {
          if (this.episode) {
            void act(this.episode, action);
          }
        }
      });
      b.hide();
      panel.toolbar.addItem(`pyrualean-${action}`, b);
      this.buttons.push(b);
      if (action === 'pause') {
        this.pauseButton = b;
      }
    }
  }

  get kernelId(): string | undefined {
    return this.panel.sessionContext.session?.kernel?.id;
  }

  get path(): string {
    return this.panel.context.path;
  }

  /** The notebook is an episode's trace (its metadata.pyrualean says what ran). */
  get isTrace(): boolean {
    return !!this.panel.model?.getMetadata('pyrualean');
  }

  asked = ''; // the episode id the person was asked about (wrong-episode dialog), once
  keep = ''; // the episode id whose kernel the person chose to keep this notebook on

  /** A new cell of the person's at the end of the notebook holding code, in edit mode: Edit as mine. */
  addOwnCell(code: string): void {
    const nb = this.panel.content;
    if (nb.widgets.length > 0) {
      nb.activeCellIndex = nb.widgets.length - 1;
    }
    nb.mode = 'command';
    NotebookActions.insertBelow(nb);
    const cell = nb.activeCell;
    if (!cell) {
      return;
    }
    cell.model.sharedModel.setSource(code);
    nb.mode = 'edit';
    cell.editor?.focus();
    void nb.scrollToItem(nb.activeCellIndex);
  }

  /** Makes the content header as tall as the bar's content (Lumino sizes it by min-height). */
  fit(): void {
    if (!this.bar.isVisible) {
      return;
    }
    requestAnimationFrame(() => {
      const style = getComputedStyle(this.bar.node);
      const pad = parseFloat(style.paddingTop) + parseFloat(style.paddingBottom) + parseFloat(style.borderBottomWidth);
      const h = Math.ceil(this.inner.getBoundingClientRect().height + (pad || 0));
      if (h !== this.fitted) {
        this.fitted = h;
        this.bar.node.style.minHeight = `${h}px`;
        this.bar.fit();
        this.bar.parent?.fit();
      }
    });
  }

  show(ep: Episode): void {
    this.episode = ep;
    this.wasOn = true;
    const under = ep.turn ?? ep.turns + 1;
    const turn = ep.max_turns ? `${under}/${ep.max_turns}` : `${under}`;
    let what = PHASES[ep.phase] ?? ep.phase;
    if (ep.phase === 'cell' && ep.running_cell) {
      what = `the agent runs cell ${ep.running_cell.turn}`;
    }
    let line = `Episode ${ep.id} · ${ep.state} · turn ${turn} · ${what}`;
    if (ep.budget_s && ep.budget_left_s !== undefined && ep.budget_left_s !== null && ep.state !== 'over') {
      line += ` · budget left ${clock(ep.budget_left_s)} of ${clock(ep.budget_s)}`;
      if (ep.state === 'paused') {
        line += ' (stopped while paused)';
      }
    }
    if (ep.paused_s && ep.paused_s >= 1 && ep.state !== 'over') {
      line += ` · paused ${clock(ep.paused_s)} so far (not the agent’s time)`;
    }
    if (ep.state === 'over') {
      line = `Episode ${ep.id} · episode over (${ep.status})`;
      if (ep.linger_until) {
        line += ` · its kernel stays until ${new Date(ep.linger_until).toLocaleTimeString()} for post-mortem work`;
      }
    }
    if (ep.human_cells) {
      line += ` · your cells: ${ep.human_cells} (${ep.human_env_steps} env steps, not counted as the agent’s)`;
    }
    this.text.textContent = line;
    const h = ep.state !== 'over' ? ep.held_cell : undefined;
    if (h) {
      this.heldTitle.textContent = `Held: the agent’s cell ${h.turn || under} (${h.tool}), not run yet — Step runs it, Discard drops it, Edit as mine makes it your cell`;
      if (this.held.textContent !== h.code) {
        this.held.textContent = h.code;
      }
    }
    this.heldBox.style.display = h ? '' : 'none';
    this.openLive.style.display = this.isLive || ep.state === 'over' ? 'none' : '';
    this.fresh.style.display = ep.state === 'over' ? '' : 'none';
    const n = this.bar.node;
    n.dataset.state = ep.state;
    n.dataset.phase = ep.phase;
    n.dataset.turn = String(under);
    n.dataset.episode = ep.id;
    n.dataset.held = h ? String(h.turn || under) : '';
    this.bar.show();
    const over = ep.state === 'over';
    for (const b of this.buttons) {
      b.setHidden(over);
    }
    this.setPressed(ep.state === 'paused');
    this.fit();
  }

  /** A notebook that is not this episode's on its live kernel: said in the bar, never silently. */
  wrong(ep: Episode, own: string): void {
    this.episode = null;
    this.wasOn = true;
    this.text.textContent =
      `Not this episode’s notebook: it is ${own}, but it is connected to episode ${ep.id}’s live kernel — ` +
      `its cells would act on episode ${ep.id}’s robot. Change the kernel (a fresh pyrualean kernel) or open episode ${ep.id}’s live notebook.`;
    this.heldBox.style.display = 'none';
    this.openLive.style.display = 'none';
    this.fresh.style.display = '';
    const n = this.bar.node;
    n.dataset.state = 'wrong-episode';
    n.dataset.phase = '';
    n.dataset.episode = ep.id;
    this.bar.show();
    for (const b of this.buttons) {
      b.hide();
    }
    this.fit();
  }

  /** The Pause button looks (and reads, for assistive tech) pressed while the episode is paused. */
  private setPressed(on: boolean): void {
    const b = this.pauseButton;
    if (!b) {
      return;
    }
    b.toggleClass('pyrualean-pressed', on);
    b.node.querySelector('button')?.setAttribute('aria-pressed', String(on));
  }

  gone(reason: string, state: 'gone' | 'gateway-back' = 'gone'): void {
    this.episode = null;
    this.text.textContent = reason;
    this.heldBox.style.display = 'none';
    this.openLive.style.display = 'none';
    // While the gateway is gone this Lab has no kernel to offer: all of its kernels come from it.
    this.fresh.style.display = state === 'gateway-back' ? '' : 'none';
    this.bar.node.dataset.state = state;
    this.bar.node.dataset.phase = 'done';
    this.bar.show();
    for (const b of this.buttons) {
      b.hide();
    }
    this.fit();
  }

  hide(): void {
    this.episode = null;
    this.bar.hide();
    for (const b of this.buttons) {
      b.hide();
    }
  }

  /** Marks people's and the agent's cells so they are told apart at a glance. */
  tagCells(): void {
    for (const cell of this.panel.content.widgets) {
      const meta = (cell.model.getMetadata('pyrualean') ?? {}) as { author?: string; turn?: number };
      const tags = (cell.model.getMetadata('tags') ?? []) as string[];
      const human = meta.author === 'human' || tags.includes('human');
      cell.toggleClass('pyrualean-human-cell', human);
      cell.toggleClass('pyrualean-agent-cell', !human && meta.author === 'agent');
      const prompt = cell.node.querySelector('.jp-InputPrompt') as HTMLElement | null;
      if (prompt && !human && meta.author === 'agent') {
        prompt.dataset.pyrualeanTurn = meta.turn ? String(meta.turn) : '';
      }
      if (cell instanceof CodeCell) {
        labelCameras(cell);
      }
    }
  }
}

/** Where attach puts an episode's live document (pyrualean_lab/live.py go_live's default). */
const livePath = (ep: Episode): string => `pyrualean-episodes/${ep.id.replace(/[^A-Za-z0-9._-]/g, '_')}.ipynb`;

/** Labels each robot image in a cell's outputs with its camera (display_data metadata.pyrualean.camera). */
const labelCameras = (cell: CodeCell): void => {
  const outputs = cell.model.outputs;
  const children = cell.outputArea.widgets;
  for (let i = 0; i < outputs.length && i < children.length; i++) {
    const meta = (outputs.get(i).metadata ?? {}) as { pyrualean?: { camera?: unknown } };
    const cam = meta.pyrualean?.camera;
    const node = children[i].node.querySelector('.jp-OutputArea-output') as HTMLElement | null;
    if (node && typeof cam === 'string' && node.dataset.pyrualeanCamera !== cam) {
      node.dataset.pyrualeanCamera = cam;
    }
  }
};

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'pyrualean-lab:episode',
  description: 'Controls and live state of a pyrualean episode in notebooks on its kernel',
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    const settings = ServerConnection.makeSettings();
    const api = URLExt.join(settings.baseUrl, 'pyrualean', 'api', 'episodes');
    const views = new Map<NotebookPanel, EpisodeView>();
    let listing: Listing = { gateway: 'none', episodes: [] };

    const request = async (url: string, init: RequestInit = {}): Promise<any> => {
      const resp = await ServerConnection.makeRequest(url, init, settings);
      let body: any = null;
      try {
        body = await resp.json();
      } catch {
        body = null;
      }
      if (!resp.ok) {
        throw new Error(body?.message ?? `HTTP ${resp.status}`);
      }
      return body;
    };

    // act performs a bar or toolbar action; it says whether the gateway took it.
    const act = async (ep: Episode, action: string): Promise<boolean> => {
      if (action === 'open-live') {
        try {
          const out = (await request(URLExt.join(api, ep.id, 'live'), { method: 'POST', body: '{}' })) as { path: string };
          await app.commands.execute('docmanager:open', { path: out.path });
          return true;
        } catch (err) {
          Notification.error(`Episode ${ep.id}: cannot open its live notebook: ${(err as Error).message}`, { autoClose: 8000 });
          return false;
        }
      }
      try {
        const updated = (await request(URLExt.join(api, ep.id, action), { method: 'POST' })) as Episode;
        for (const v of views.values()) {
          if (v.episode?.id === updated.id) {
            v.show(updated);
          }
        }
        // A Pause cancels the model call under way and a Step or Discard moves the held cell: the
        // answer above is from the moment of the action, so look again shortly.
        for (const ms of [150, 500]) {
          setTimeout(() => void poll(), ms);
        }
        return true;
      } catch (err) {
        Notification.error(`Episode ${ep.id}: ${(err as Error).message}`, { autoClose: 8000 });
        return false;
      }
    };

    const episodeOf = (v: EpisodeView): Episode | undefined =>
      listing.episodes.find(e => e.kernel_id && e.kernel_id === v.kernelId);

    // Which episode a notebook is: the live document's (listing.live), else none for a person's own
    // notebook; an episode trace that is not a live document of this episode is another's.
    const ownerOf = (v: EpisodeView, ep: Episode): string | null => {
      const liveFor = listing.live?.[v.path];
      if (v.path === livePath(ep) && liveFor === undefined) {
        return null; // the episode's own live document (this server has not attached it since it started)
      }
      if (liveFor !== undefined) {
        return liveFor === ep.id ? null : `episode ${liveFor}’s notebook`;
      }
      return v.isTrace && v.keep !== ep.id ? 'another episode’s trace' : null;
    };

    const askWrong = async (panel: NotebookPanel, v: EpisodeView, ep: Episode, own: string): Promise<void> => {
      if (v.asked === ep.id) {
        return;
      }
      v.asked = ep.id;
      const r = await showDialog({
        title: 'This notebook is not the live episode’s',
        body: `${v.path} is ${own}, but it is connected to the live kernel of episode ${ep.id}: its cells would act on that episode’s robot.`,
        buttons: [
          Dialog.cancelButton({ label: `Keep it on episode ${ep.id}` }),
          Dialog.okButton({ label: 'Use a fresh pyrualean kernel' })
        ]
      });
      if (r.button.accept) {
        await useFreshKernel(panel);
      } else {
        v.keep = ep.id;
      }
      refresh();
    };

    // The Launcher never offers an episode's live kernel as a card: it is attached to, not started.
    const liveSpecs = (): { names: Set<string>; displays: Set<string>; kernels: Set<string> } => {
      const out = { names: new Set<string>(), displays: new Set<string>(), kernels: new Set<string>() };
      const specs = app.serviceManager.kernelspecs.specs?.kernelspecs ?? {};
      for (const sp of Object.values(specs)) {
        const meta = (sp?.metadata ?? {}) as { pyrualean?: { live_kernel_id?: string } };
        if (sp && meta.pyrualean?.live_kernel_id) {
          out.names.add(sp.name);
          out.displays.add(sp.display_name);
          out.kernels.add(meta.pyrualean.live_kernel_id);
        }
      }
      return out;
    };
    const liveNames = (): Set<string> => liveSpecs().displays;

    // Lab's Select Kernel dialog preselects the first python kernelspec by name when it has no better
    // idea (a new notebook, a notebook whose kernel is gone), and "pyrualean episode …" sorts first:
    // never preselect an episode's live kernel; a person who means it picks it.
    const unpreselectLive = (): void => {
      for (const sel of Array.from(document.querySelectorAll<HTMLSelectElement>('.jp-Dialog select'))) {
        if (sel.dataset.pyrualeanChecked || sel.options.length === 0) {
          continue;
        }
        sel.dataset.pyrualeanChecked = 'true';
        const live = liveSpecs();
        const isLive = (o: HTMLOptionElement | undefined): boolean => {
          try {
            const v = JSON.parse(o?.value ?? 'null') as { name?: string; id?: string } | null;
            return !!v && ((!!v.name && live.names.has(v.name)) || (!!v.id && live.kernels.has(v.id)));
          } catch {
            return false;
          }
        };
        if (!isLive(sel.options[sel.selectedIndex])) {
          continue;
        }
        const dflt = app.serviceManager.kernelspecs.specs?.default;
        const opts = Array.from(sel.options);
        const pick =
          opts.find(o => !isLive(o) && o.value === JSON.stringify({ name: dflt })) ??
          opts.find(o => !isLive(o) && /"name"/.test(o.value));
        if (pick) {
          sel.value = pick.value;
          sel.dispatchEvent(new Event('change', { bubbles: true }));
        }
      }
    };
    const hideLiveCards = (): void => {
      const names = liveNames();
      for (const card of Array.from(document.querySelectorAll<HTMLElement>('.jp-LauncherCard'))) {
        const live = names.has(card.title) || /\(live agent kernel\)$/.test(card.title);
        card.style.display = live ? 'none' : '';
        card.dataset.pyrualeanLive = live ? 'true' : '';
      }
    };
    let hideQueued = false;
    new MutationObserver(() => {
      if (!hideQueued) {
        hideQueued = true;
        requestAnimationFrame(() => {
          hideQueued = false;
          hideLiveCards();
          unpreselectLive();
        });
      }
    }).observe(document.body, { childList: true, subtree: true });
    let toldGone = false; // the gateway's end is told once, not once per open notebook

    const refresh = (): void => {
      for (const [panel, v] of views) {
        if (panel.isDisposed) {
          views.delete(panel);
          continue;
        }
        v.tagCells();
        const ep = episodeOf(v);
        const own = ep ? ownerOf(v, ep) : null;
        if (ep && own) {
          v.wrong(ep, own);
          void askWrong(panel, v, ep, own);
        } else if (ep) {
          v.isLive = listing.live?.[v.path] === ep.id || v.path === livePath(ep);
          v.show(ep);
          for (const r of ep.refusals ?? []) {
            const key = `${r.at} ${r.action}`;
            if (!v.seenRefusals.has(key)) {
              v.seenRefusals.add(key);
              Notification.warning(`The gateway refused to ${r.action} the episode’s kernel: ${r.reason}.`, {
                autoClose: 10000
              });
            }
          }
        } else if (v.wasOn && listing.gateway === 'gone') {
          if (v.bar.node.dataset.state !== 'gone' && !toldGone) {
            toldGone = true;
            Notification.warning(
              'The episode is over and its gateway is gone, with its kernel: its notebooks keep what they show. ' +
                'This Lab’s kernels all come from that gateway, so none can run until one is back at its address.',
              { autoClose: 10000 }
            );
          }
          v.gone(
            'Episode over: its gateway is gone, and with it the kernel. This Lab’s kernels all come from that gateway ' +
              '(--gateway-url): cells run again once one is back there (another episode’s play --serve, or pyrualean serve), ' +
              'and this bar then offers a fresh pyrualean kernel.'
          );
        } else if (v.wasOn && listing.gateway === 'ok' && v.bar.node.dataset.state === 'gone') {
          v.gone(
            'The episode this notebook was on is over and its kernel gone. A gateway is back: put the notebook on a fresh ' +
              'pyrualean kernel to run cells (its own robot, not another episode’s).',
            'gateway-back'
          );
        } else if (!v.wasOn) {
          v.hide();
        }
      }
    };

    const poll = async (): Promise<void> => {
      try {
        listing = (await request(api)) as Listing;
      } catch {
        listing = { gateway: 'none', episodes: [] };
      }
      if (listing.gateway === 'ok') {
        toldGone = false;
      }
      refresh();
      hideLiveCards();
    };

    tracker.widgetAdded.connect((_, panel) => {
      const v = new EpisodeView(panel, act);
      views.set(panel, v);
      panel.sessionContext.kernelChanged.connect(() => refresh());
      panel.disposed.connect(() => views.delete(panel));
    });

    // A person's cell on an episode's kernel: tag it as theirs, and say when it waits for the agent.
    NotebookActions.executionScheduled.connect((_, { notebook, cell }) => {
      const panel = [...views.keys()].find(p => p.content === notebook);
      const v = panel ? views.get(panel) : undefined;
      const dead = v && ['gone', 'gateway-back'].includes(v.bar.node.dataset.state ?? '');
      if (v && dead && cell.model.type === 'code') {
        // JupyterLab leaves a cell run on a dead kernel marked [*] for ever: say why and clear it.
        Notification.error(
          v.bar.node.dataset.state === 'gateway-back'
            ? 'This notebook’s kernel was the episode’s, and it is gone: use a fresh pyrualean kernel (in the bar) to run cells.'
            : 'This notebook’s kernel was the episode’s, and it is gone with its gateway: no kernel can run until a gateway is back.',
          { autoClose: 8000 }
        );
        setTimeout(() => {
          const model = cell.model as ICodeCellModel;
          if (model.executionState === 'running') {
            model.executionState = 'idle';
          }
        }, 300);
        return;
      }
      const ep = v ? episodeOf(v) : undefined;
      if (!v || !ep) {
        return;
      }
      // After the end (a kernel kept for people), the cell is still the person's, and after the end:
      // the trace records it so too, apart from the episode's counts.
      const after = ep.state === 'over';
      const tags = (cell.model.getMetadata('tags') ?? []) as string[];
      const want = after ? ['human', 'after-end'] : ['human'];
      if (want.some(t => !tags.includes(t))) {
        cell.model.setMetadata('tags', [...tags, ...want.filter(t => !tags.includes(t))]);
      }
      cell.model.setMetadata('pyrualean', after ? { author: 'human', after_end: true } : { author: 'human' });
      if (after) {
        return;
      }
      // The listing is up to a poll old (POLL_MS): ask again, so a cell run just after the agent's
      // began is told too (and one run just after it ended is not).
      void poll().then(() => {
        const now = episodeOf(v) ?? ep;
        if (now.phase === 'cell' && now.running_cell) {
          Notification.info(
            `Your cell is queued behind agent cell ${now.running_cell.turn}: it runs when that cell ends.`,
            { autoClose: 6000 }
          );
        }
      });
    });

    const loop = async (): Promise<void> => {
      for (;;) {
        await poll();
        await new Promise(r => setTimeout(r, POLL_MS));
      }
    };
    void loop();
    console.log('pyrualean-lab: episode controls active');
  }
};

export default plugin;
