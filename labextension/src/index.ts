// pyrualean in JupyterLab: a notebook on a live episode's kernel gets an episode bar (state, turn,
// what the agent does, the held cell's code), Pause / Step / Resume in its toolbar, a notice when a
// person's cell is queued behind the agent's, the gateway's refusals as messages, and a visible tag on
// people's and the agent's cells. It talks to the server extension (pyrualean_lab), which talks to the
// gateway: GET /pyrualean/api/episodes, POST /pyrualean/api/episodes/{id}/{pause|step|resume}.
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { Notification, ToolbarButton } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { ICodeCellModel } from '@jupyterlab/cells';
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
  max_turns: number;
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
  error?: string;
}

const PHASES: Record<string, string> = {
  thinking: 'the agent is deciding',
  cell: 'the agent runs a cell',
  waiting: 'paused before the agent’s next decision',
  held: 'paused: the agent’s next cell is held',
  done: 'the episode is over'
};

/** The episode bar and buttons of one notebook panel. */
class EpisodeView {
  readonly bar: Widget;
  private text: HTMLElement;
  private held: HTMLPreElement;
  private buttons: ToolbarButton[] = [];
  episode: Episode | null = null;
  wasOn = false; // the panel was on an episode's kernel (so a vanished episode is worth saying)
  seenRefusals = new Set<string>();

  constructor(private panel: NotebookPanel, act: (ep: Episode, action: string) => void) {
    this.bar = new Widget();
    this.bar.addClass('pyrualean-episode-bar');
    this.text = document.createElement('span');
    this.text.className = 'pyrualean-episode-text';
    this.held = document.createElement('pre');
    this.held.className = 'pyrualean-held-code';
    this.bar.node.append(this.text, this.held);
    this.bar.hide();
    panel.contentHeader.addWidget(this.bar);
    for (const [action, label, tip] of [
      ['pause', 'Pause', 'Pause the agent before its next decision'],
      ['step', 'Step', 'Let the agent make one decision (or run its held cell), then pause again'],
      ['resume', 'Resume', 'Let the agent go on']
    ]) {
      const b = new ToolbarButton({
        className: `pyrualean-${action}`,
        label,
        tooltip: tip,
        onClick: () => {
          if (this.episode) {
            act(this.episode, action);
          }
        }
      });
      b.hide();
      panel.toolbar.addItem(`pyrualean-${action}`, b);
      this.buttons.push(b);
    }
  }

  get kernelId(): string | undefined {
    return this.panel.sessionContext.session?.kernel?.id;
  }

  show(ep: Episode): void {
    this.episode = ep;
    this.wasOn = true;
    const turn = ep.max_turns ? `${ep.turns}/${ep.max_turns}` : `${ep.turns}`;
    let what = PHASES[ep.phase] ?? ep.phase;
    if (ep.phase === 'cell' && ep.running_cell) {
      what = `the agent runs cell ${ep.running_cell.turn}`;
    }
    let line = `Episode ${ep.id} · ${ep.state} · turn ${turn} · ${what}`;
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
    this.held.textContent = ep.held_cell ? `held cell (${ep.held_cell.tool}):\n${ep.held_cell.code}` : '';
    this.held.style.display = ep.held_cell ? '' : 'none';
    const n = this.bar.node;
    n.dataset.state = ep.state;
    n.dataset.phase = ep.phase;
    n.dataset.turn = String(ep.turns);
    n.dataset.episode = ep.id;
    this.bar.show();
    const over = ep.state === 'over';
    for (const b of this.buttons) {
      b.setHidden(over);
    }
  }

  gone(reason: string): void {
    this.episode = null;
    this.text.textContent = reason;
    this.held.style.display = 'none';
    this.bar.node.dataset.state = 'gone';
    this.bar.node.dataset.phase = 'done';
    this.bar.show();
    for (const b of this.buttons) {
      b.hide();
    }
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
    }
  }
}

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

    const act = async (ep: Episode, action: string): Promise<void> => {
      try {
        const updated = (await request(URLExt.join(api, ep.id, action), { method: 'POST' })) as Episode;
        for (const v of views.values()) {
          if (v.episode?.id === updated.id) {
            v.show(updated);
          }
        }
      } catch (err) {
        Notification.error(`Episode ${ep.id}: ${(err as Error).message}`, { autoClose: 8000 });
      }
    };

    const episodeOf = (v: EpisodeView): Episode | undefined =>
      listing.episodes.find(e => e.kernel_id && e.kernel_id === v.kernelId);

    const refresh = (): void => {
      for (const [panel, v] of views) {
        if (panel.isDisposed) {
          views.delete(panel);
          continue;
        }
        v.tagCells();
        const ep = episodeOf(v);
        if (ep) {
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
          if (v.bar.node.dataset.state !== 'gone') {
            Notification.warning(
              'The episode is over and its gateway is gone: this notebook has no kernel any more. Pick another kernel to run cells.',
              { autoClose: 10000 }
            );
          }
          v.gone('Episode over: its gateway is gone, and with it the kernel.');
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
      refresh();
    };

    tracker.widgetAdded.connect((_, panel) => {
      const v = new EpisodeView(panel, (ep, action) => void act(ep, action));
      views.set(panel, v);
      panel.sessionContext.kernelChanged.connect(() => refresh());
      panel.disposed.connect(() => views.delete(panel));
    });

    // A person's cell on an episode's kernel: tag it as theirs, and say when it waits for the agent.
    NotebookActions.executionScheduled.connect((_, { notebook, cell }) => {
      const panel = [...views.keys()].find(p => p.content === notebook);
      const v = panel ? views.get(panel) : undefined;
      if (v && v.bar.node.dataset.state === 'gone' && cell.model.type === 'code') {
        // JupyterLab leaves a cell run on a dead kernel marked [*] for ever: say why and clear it.
        Notification.error(
          'This notebook’s kernel was the episode’s, and it is gone with its gateway: pick another kernel to run cells.',
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
      if (!v || !ep || ep.state === 'over') {
        return;
      }
      const tags = (cell.model.getMetadata('tags') ?? []) as string[];
      if (!tags.includes('human')) {
        cell.model.setMetadata('tags', [...tags, 'human']);
      }
      cell.model.setMetadata('pyrualean', { author: 'human' });
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
