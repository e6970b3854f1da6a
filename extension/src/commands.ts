// The TensorRT commands of the UI (Build Engine, Stop Build, Run Gates, Show Build Evidence, Show Build Timeline,
// Print Debug Information) and what the user sees after a server command. Argument and reply shapes are the
// generated protocol's; the words of a verdict are the server's (trtls.core.display).
import * as path from 'path';
import * as vscode from 'vscode';
import { BuildTreeModel, TreeElement } from './buildTree';
import { RECIPE_GLOB, ServerClient } from './client';
import { BuildEngineReply, BuildMatrixReply, CancelBuildReply, EvidenceReply, RollbackEngineReply, RunGatesReply } from './generated/protocol';
import { showBuildTimeline } from './timeline';
import { BuildViews } from './views';

export class UiCommands {
  constructor(
    private readonly ctx: vscode.ExtensionContext,
    private readonly log: vscode.LogOutputChannel,
    private readonly server: ServerClient,
    private readonly model: BuildTreeModel,
    private readonly views: BuildViews,
  ) {}

  /** Registers every command; VS Code passes a command whatever its caller gave (a tree element, a Uri, a code
   *  lens's argument, nothing): each handler checks its arguments itself. */
  register(restart: () => Promise<void>): void {
    const reg = (id: string, fn: (arg?: unknown) => Promise<void>): void => {
      this.ctx.subscriptions.push(vscode.commands.registerCommand(id, async (arg?: unknown) => {
        try {
          await fn(arg);
        } catch (e) {
          const msg = e instanceof Error ? e.message : String(e);
          this.log.error(`${id} failed: ${msg}`);
          void vscode.window.showErrorMessage(`TensorRT: ${msg}`);
        }
      }));
    };
    reg('trtls.ui.buildEngine', (a) => this.buildEngine(a));
    reg('trtls.ui.stopBuild', (a) => this.stopBuild(a));
    reg('trtls.ui.runGates', (a) => this.runGates(a));
    reg('trtls.ui.showEvidence', (a) => this.showEvidence(a));
    reg('trtls.ui.showBuildTimeline', (a) => this.showTimeline(a));
    reg('trtls.ui.restartServer', restart);
    reg('trtls.ui.printDebugInformation', () => this.printDebugInformation());
    this.server.onCommandResult = (command, arg, res) => this.showResult(command, arg, res);
  }

  private async findRecipe(arg: unknown): Promise<vscode.Uri | undefined> {
    if (arg instanceof vscode.Uri) return arg;
    const active = vscode.window.activeTextEditor?.document.uri;
    if (active !== undefined && path.basename(active.fsPath) === 'trtls.toml') return active;
    const visible = vscode.window.visibleTextEditors.map((e) => e.document.uri).find((u) => path.basename(u.fsPath) === 'trtls.toml');
    if (visible !== undefined) return visible;
    const found = await vscode.workspace.findFiles(RECIPE_GLOB, '**/node_modules/**', 50);
    found.sort((a, b) => a.fsPath.localeCompare(b.fsPath));
    if (found.length === 0) {
      void vscode.window.showWarningMessage('TensorRT: no trtls.toml in this workspace.');
      return undefined;
    }
    return found[0];
  }

  private async pickTarget(arg: unknown, key: 'engine' | 'route'): Promise<{ uri: string; name: string } | undefined> {
    const direct = targetArg(arg, key);
    if (direct !== undefined) return direct;
    const recipe = await this.findRecipe(arg);
    if (recipe === undefined) return undefined;
    const uri = recipe.toString();
    const targets = await this.server.command('trtls.listTargets', { uri });
    const names = key === 'engine' ? targets.engines : targets.routes;
    if (!names || names.length === 0) {
      void vscode.window.showWarningMessage(`TensorRT: ${vscode.workspace.asRelativePath(recipe)} has no ${key === 'engine' ? 'engines' : 'routes'}.`);
      return undefined;
    }
    const picked = names.length === 1 ? names[0] : await vscode.window.showQuickPick(names, {
      title: key === 'engine' ? 'TensorRT: Build Engine' : 'TensorRT: Run Gates',
      placeHolder: `${key === 'engine' ? 'Engine' : 'Route'} from ${vscode.workspace.asRelativePath(recipe)}`,
    });
    return picked === undefined ? undefined : { uri, name: picked };
  }

  private async buildEngine(arg?: unknown): Promise<void> {
    const t = await this.pickTarget(arg, 'engine');
    if (t === undefined) return;
    const a = { uri: t.uri, engine: t.name };
    await this.showResult('trtls.buildEngine', a, await this.server.command('trtls.buildEngine', a));
  }

  private revealBuilds(): void {
    if (vscode.workspace.getConfiguration('trtls').get<boolean>('showBuildsViewOnBuild', true)) {
      void vscode.commands.executeCommand('trtls.builds.focus').then(undefined, () => undefined);
    }
  }

  /** What the user sees after a server command, whether it ran from our UI or from a server code lens / quick fix. */
  private async showResult(command: string, arg: unknown, res: unknown): Promise<void> {
    if (typeof res !== 'object' || res === null) return;
    const a = (typeof arg === 'object' && arg !== null ? arg : {}) as Record<string, unknown>;
    switch (command) {
      case 'trtls.buildEngine': {
        const r = res as BuildEngineReply;
        const engine = r.engine ?? stringOr(a.engine, '?');
        if (r.status === 'already_building') {
          void vscode.window.showInformationMessage(`TensorRT: ${engine} is already building.`);
        }
        if (r.status === 'reused') {
          // served from the engine store: no worker ran; the server sent its finished row (trtls/buildTree)
          void vscode.window.showInformationMessage(`TensorRT: ${engine}: ${r.message ?? 'up to date'}`);
          this.views.refresh();
        } else if (r.status === 'store_error') {
          void vscode.window.showErrorMessage(`TensorRT: ${engine}: ${(r.errors ?? []).join('; ')}`);
          break;
        } else if (r.buildId && (r.status === 'started' || r.status === 'already_building')) {
          this.model.noteStarted(r.buildId, engine, stringOr(a.uri, ''));
          this.views.refresh();
        }
        this.revealBuilds();
        break;
      }
      case 'trtls.rollbackEngine': {
        const r = res as RollbackEngineReply;
        void vscode.window.showInformationMessage(`TensorRT: ${r.engine ?? stringOr(a.engine, '?')}: ${r.message}`);
        this.views.refresh();
        this.revealBuilds();
        break;
      }
      case 'trtls.buildMatrix': {
        // A build farm run: the server's notifications bring the parent and its cells; a refusal (no node has a label,
        // the cluster is unreachable) is also in Problems, on the recipe key.
        const r = res as BuildMatrixReply;
        if (r.status === 'refused' || r.status === 'invalid_recipe') {
          void vscode.window.showWarningMessage(`TensorRT: the matrix was not started: ${(r.errors ?? []).join('; ')}`);
        } else {
          const reused = r.reused ?? [];
          if (r.status === 'reused') {
            void vscode.window.showInformationMessage(`TensorRT: every cell is up to date (${reused.length} from the engine store); nothing to build.`);
          } else if (reused.length > 0) {
            this.log.info(`matrix: ${reused.map((c) => `${c.cell}: ${c.message ?? 'up to date'}`).join('; ')}`);
          }
          this.views.refresh();
          this.revealBuilds();
        }
        break;
      }
      case 'trtls.cancelBuild': {
        // a stopped run shows itself in the tree; the server's sentence says a stop that cut only an upload, or nothing
        const r = res as CancelBuildReply;
        if (r.stopped !== 'run') {
          void vscode.window.showInformationMessage(`TensorRT: ${r.message}`);
        }
        break;
      }
      case 'trtls.showEvidence':
        await openEvidence((res as EvidenceReply).path);
        break;
      case 'trtls.runGates': {
        const v = (res as RunGatesReply).verdict;  // the server's sentence and level (trtls.core.display.gates_verdict)
        if (v === undefined) break;
        this.log.info(`gates: ${v.text}`);
        if (v.level === 'info') {
          void vscode.window.showInformationMessage(`TensorRT: ${v.text}`);
        } else {
          void vscode.window.showWarningMessage(`TensorRT: ${v.text}`, ...(v.showProblems ? ['Show Problems'] : [])).then((x) => {
            if (x) void vscode.commands.executeCommand('workbench.actions.view.problems');
          });
        }
        break;
      }
      case 'trtls.printDebugInformation':
        this.log.info(stringOr((res as { text?: unknown }).text, JSON.stringify(res)));
        this.log.show(true);
        break;
      default:
        break;
    }
  }

  private async stopBuild(arg?: unknown): Promise<void> {
    let buildId = buildIdOf(arg);
    if (buildId === undefined) {
      let running = this.model.running().map((b) => ({ buildId: b.buildId, engine: b.engine }));
      if (running.length === 0) {
        const listed = await this.server.command('trtls.listBuilds', {});
        running = listed.builds.filter((b) => b.status === 'running');
      }
      if (running.length === 0) {
        void vscode.window.showInformationMessage('TensorRT: no build is running.');
        return;
      }
      if (running.length === 1) {
        buildId = running[0]!.buildId;
      } else {
        const p = await vscode.window.showQuickPick(running.map((b) => ({ label: b.engine, description: b.buildId, buildId: b.buildId })), { title: 'TensorRT: Stop Build' });
        buildId = p?.buildId;
      }
    }
    if (buildId === undefined) return;
    await this.showResult('trtls.cancelBuild', { buildId }, await this.server.command('trtls.cancelBuild', { buildId, source: 'ide_stop' }));
  }

  private async runGates(arg?: unknown): Promise<void> {
    const t = await this.pickTarget(arg, 'route');
    if (t === undefined) return;
    const a = { uri: t.uri, route: t.name };
    await this.showResult('trtls.runGates', a, await this.server.command('trtls.runGates', a));
  }

  /** The build a command acts on: the tree item it was run from, or one the user picks (newest first). With
   * `needReport`, only runs the server has a report page for (`hasReport`: no gates run, reduction or divergence). */
  private async pickFinishedBuild(
    arg: unknown, title: string, needReport = false,
  ): Promise<{ buildId: string; engine: string } | undefined> {
    const buildId = buildIdOf(arg);
    if (buildId !== undefined) return { buildId, engine: this.model.get(buildId)?.engine ?? buildId };
    const listed = await this.server.command('trtls.listBuilds', {});
    // only builds that kept their evidence (keep_evidence = false drops it)
    const done = listed.builds
      .filter((b) => b.status !== 'running' && b.evidencePath && (!needReport || b.hasReport === true))
      .reverse();
    if (done.length === 0) {
      void vscode.window.showInformationMessage('TensorRT: no finished build with evidence yet.');
      return undefined;
    }
    const p = await vscode.window.showQuickPick(
      done.map((b) => ({ label: b.engine, description: `${b.status} · ${b.buildId}`, buildId: b.buildId })),
      { title });
    return p === undefined ? undefined : { buildId: p.buildId, engine: p.label };
  }

  private async showTimeline(arg?: unknown): Promise<void> {
    const picked = await this.pickFinishedBuild(arg, 'TensorRT: Show Build Timeline', true);
    if (picked === undefined) return;
    const report = await this.server.command('trtls.buildReport', { buildId: picked.buildId });
    showBuildTimeline(report, picked.engine);
  }

  private async showEvidence(arg?: unknown): Promise<void> {
    const buildId = (await this.pickFinishedBuild(arg, 'TensorRT: Show Build Evidence'))?.buildId;
    if (buildId === undefined) return;
    let file = this.model.get(buildId)?.evidencePath ?? null;
    if (file === null) {
      file = (await this.server.command('trtls.showEvidence', { buildId })).path;
    }
    await openEvidence(file);
  }

  private async printDebugInformation(): Promise<void> {
    const res = await this.server.command('trtls.printDebugInformation', {});
    const ext = (this.ctx.extension.packageJSON as { version?: string }).version;
    const text = `trtls extension ${ext}, VS Code ${vscode.version}\nserver: ${this.server.description}\n\n${res.text}`;
    this.log.info(text);
    this.log.show(true);
  }
}

function stringOr(v: unknown, fallback: string): string {
  return typeof v === 'string' ? v : fallback;
}

/** Arguments from a code lens: {uri, engine} / {uri, route}. */
function targetArg(arg: unknown, key: 'engine' | 'route'): { uri: string; name: string } | undefined {
  if (typeof arg === 'object' && arg !== null && !(arg instanceof vscode.Uri)) {
    const o = arg as Record<string, unknown>;
    if (typeof o.uri === 'string' && typeof o[key] === 'string') return { uri: o.uri, name: o[key] };
  }
  return undefined;
}

function buildIdOf(arg: unknown): string | undefined {
  if (typeof arg !== 'object' || arg === null) return undefined;
  const o = arg as Partial<TreeElement> & { buildId?: unknown };
  return typeof o.buildId === 'string' ? o.buildId : undefined;
}

async function openEvidence(file: string | null | undefined): Promise<void> {
  if (!file) {
    void vscode.window.showInformationMessage('TensorRT: this build has no evidence.');
    return;
  }
  const uri = file.includes('://') ? vscode.Uri.parse(file) : vscode.Uri.file(file);
  await vscode.window.showTextDocument(uri, { preview: true });
}
