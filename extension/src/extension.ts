// trtls VS Code client: starts `<python> -m trtls serve`, shows and forwards. All logic is in the server.
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import {
  CloseAction, CloseHandlerResult, CodeLensRequest, ErrorHandler, ExecuteCommandRequest, LanguageClient, LanguageClientOptions,
  RevealOutputChannelOn, ServerOptions, State,
} from 'vscode-languageclient/node';
import { BUILD_TREE_NOTIFICATION, BuildTreeModel, statusBarText, TreeElement } from './buildTree';
import { EndKind, gatesOutcome } from './progress';
import { ToastProgressFeature } from './progressUi';
import { checkServerVersion, expandPath, initializationOptions, needsRestart, readSettings, resolvePython, TrtlsSettings } from './settings';
import { BuildReportResult, showBuildTimeline } from './timeline';
import { BuildTreeProvider } from './treeView';

const RECIPE_GLOB = '**/trtls.toml';

interface ListTargetsResult { engines: string[]; routes: string[] }
interface BuildResult { buildId: string; engine: string; status: string }  // status: started | already_building
interface CancelResult { buildId: string; accepted: boolean }
interface ListBuildsResult { builds: { buildId: string; engine: string; uri: string; status: string; evidencePath: string | null }[] }
interface EvidenceResult { buildId: string; path: string | null; summary?: unknown }
interface GatesResult { route: string; decision: string | null; stopped?: boolean; status?: string; [k: string]: unknown }  // decision: supported | hold | reject

/** Crashes the language client restarts before it gives up (its default; 5 crashes within 3 minutes stop it). */
const MAX_RESTARTS = 4;

interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { path: string };
    resolveEnvironment(env: { path: string } | string): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
}

let ctx: vscode.ExtensionContext;
let log: vscode.LogOutputChannel;
let client: LanguageClient | undefined;
let clientSubs: vscode.Disposable[] = [];
let lifecycle: Promise<void> = Promise.resolve();
const model = new BuildTreeModel();
let tree: BuildTreeProvider;
let statusItem: vscode.StatusBarItem;
let serverDescription = '';
let lastPython = 'python3';

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  ctx = context;
  log = vscode.window.createOutputChannel('TensorRT Language Server', { log: true });
  context.subscriptions.push(log);
  tree = new BuildTreeProvider(model);
  const view = vscode.window.createTreeView('trtls.builds', { treeDataProvider: tree, showCollapseAll: true });
  statusItem = vscode.window.createStatusBarItem('trtls.builds', vscode.StatusBarAlignment.Left, 50);
  statusItem.name = 'TensorRT builds';
  statusItem.command = 'trtls.ui.stopBuild';
  statusItem.tooltip = 'TensorRT build running — click to stop';
  context.subscriptions.push(view, statusItem);
  void vscode.commands.executeCommand('setContext', 'trtls.isBuilding', false);

  // VS Code passes a command whatever its caller gave (a tree element, a Uri, a code lens's argument, nothing):
  // each handler checks its arguments itself.
  const reg = <A extends unknown[]>(id: string, fn: (...args: A) => unknown): void => {
    context.subscriptions.push(vscode.commands.registerCommand(id, async (...args: unknown[]) => {
      try {
        await fn(...(args as A));
      } catch (e) {
        const msg = e instanceof Error ? e.message : String(e);
        log.error(`${id} failed: ${msg}`);
        void vscode.window.showErrorMessage(`TensorRT: ${msg}`);
      }
    }));
  };
  reg('trtls.ui.buildEngine', buildEngine);
  reg('trtls.ui.stopBuild', stopBuild);
  reg('trtls.ui.runGates', runGates);
  reg('trtls.ui.showEvidence', showEvidence);
  reg('trtls.ui.showBuildTimeline', showTimeline);
  reg('trtls.ui.restartServer', () => restart('command'));
  reg('trtls.ui.printDebugInformation', printDebugInformation);

  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration((e) => {
    if (needsRestart((s) => e.affectsConfiguration(s))) {
      log.info('trtls settings changed, restarting the server');
      void restart('settings changed');
    }
  }));
  await watchPythonExtension(context);
  if (await recipePresent()) {
    await restart('activation');
  } else {
    // Activated by a TOML file that is not a recipe (onLanguage:toml, e.g. a lone Cargo.toml): start the server
    // only when a trtls.toml is opened, so other TOML files never cost a Python process.
    const waiting = vscode.workspace.onDidOpenTextDocument((doc) => {
      if (isRecipe(doc)) {
        waiting.dispose();
        void restart('recipe opened');
      }
    });
    context.subscriptions.push(waiting);
  }
}

function isRecipe(doc: vscode.TextDocument): boolean {
  return doc.uri.scheme === 'file' && path.basename(doc.uri.fsPath) === 'trtls.toml';
}

/** A trtls.toml is open (a lone file, no folder) or somewhere in the workspace. */
async function recipePresent(): Promise<boolean> {
  if (vscode.workspace.textDocuments.some(isRecipe)) return true;
  return (await vscode.workspace.findFiles(RECIPE_GLOB, '**/node_modules/**', 1)).length > 0;
}

export async function deactivate(): Promise<void> {
  await stopClient();
}

// ---------------------------------------------------------------- client lifecycle

function currentSettings(): TrtlsSettings {
  const cfg = vscode.workspace.getConfiguration('trtls');
  const { settings, problems } = readSettings((k) => cfg.get(k));
  for (const p of problems) {
    log.warn(p);
    void vscode.window.showWarningMessage(`TensorRT: ${p}`);
  }
  return settings;
}

async function pythonExtensionApi(): Promise<PythonExtensionApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonExtensionApi>('ms-python.python');
  if (ext === undefined) return undefined;
  try {
    return ext.isActive ? ext.exports : await ext.activate();
  } catch (e) {
    log.warn(`ms-python.python did not activate: ${String(e)}`);
    return undefined;
  }
}

async function interpreterFromPythonExtension(): Promise<string | undefined> {
  const api = await pythonExtensionApi();
  if (api?.environments === undefined) return undefined;
  try {
    const resource = vscode.workspace.workspaceFolders?.[0]?.uri;
    const active = api.environments.getActiveEnvironmentPath(resource);
    const env = await api.environments.resolveEnvironment(active);
    return env?.executable.uri?.fsPath ?? active.path;
  } catch (e) {
    log.warn(`could not read the Python extension's interpreter: ${String(e)}`);
    return undefined;
  }
}

async function watchPythonExtension(context: vscode.ExtensionContext): Promise<void> {
  const api = await pythonExtensionApi();
  if (api?.environments !== undefined) {
    context.subscriptions.push(api.environments.onDidChangeActiveEnvironmentPath(() => {
      if (currentSettings().python === '') {
        log.info('Python interpreter changed, restarting the server');
        void restart('interpreter changed');
      }
    }));
  }
}

/** Serialises start/stop so settings changes in quick succession do not race. */
function restart(reason: string): Promise<void> {
  lifecycle = lifecycle.then(async () => {
    await stopClient();
    await startClient(reason);
  }).catch((e) => {
    log.error(`server start failed: ${String(e)}`);
    void vscode.window.showErrorMessage(
      `TensorRT: the trtls server did not start with ${lastPython} (${e instanceof Error ? e.message : String(e)}). ` +
      'Set trtls.python to a Python where trtls is installed (pip install trtls).', 'Show Log', 'Open Settings')
      .then((a) => {
        if (a === 'Show Log') log.show();
        if (a === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'trtls.python');
      });
  });
  return lifecycle;
}

async function stopClient(): Promise<void> {
  const c = client;
  client = undefined;
  for (const d of clientSubs) d.dispose();
  clientSubs = [];
  if (c !== undefined) {
    try {
      await c.stop(8000);
    } catch (e) {
      log.warn(`stopping the server: ${String(e)}`);
    }
    await c.dispose().catch(() => undefined);
  }
  model.clear();
  refreshBuildState();
}

async function startClient(reason: string): Promise<void> {
  const settings = currentSettings();
  const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  const configured = expandPath(settings.python, { workspaceFolder: cwd, home: os.homedir(), env: process.env });
  const { python, source } = resolvePython(configured, configured === '' ? await interpreterFromPythonExtension() : undefined);
  lastPython = python;
  log.info(`starting trtls server (${reason}): ${python} -m trtls serve  [interpreter from ${source}]`);
  const serverOptions: ServerOptions = {
    command: python,
    args: ['-m', 'trtls', 'serve'],
    // No `transport`: TransportKind.stdio would append `--stdio` to the arguments.
    options: { cwd, env: { ...process.env, PYTHONUNBUFFERED: '1' } },
  };
  let stock: ErrorHandler | undefined;  // the client's default handler, made once the client exists
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: 'file', pattern: RECIPE_GLOB }],
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher(RECIPE_GLOB) },
    outputChannel: log,
    traceOutputChannel: log,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    initializationOptions: initializationOptions(settings),
    // A server that cannot start (wrong interpreter, trtls not installed) is reported once, not retried 5 times.
    initializationFailedHandler: () => false,
    // A crashed server is restarted by the client (its default handler); when it gives up, offer the way back.
    errorHandler: {
      error: (error, message, count) => stock!.error(error, message, count),
      closed: async (): Promise<CloseHandlerResult> => {
        const r = await stock!.closed();
        if (r.action === CloseAction.DoNotRestart) {
          offerRestartAfterCrashes(r.message);
          return { ...r, handled: true };  // our message replaces the stock one (which only offers the log)
        }
        log.warn('the trtls server process stopped unexpectedly; the client restarts it');
        return r;
      },
    },
    middleware: {
      // Server commands run from the server's code lenses and quick fixes come back here: show their results.
      executeCommand: async (command, args, next) => {
        const res: unknown = await next(command, args);
        await showCommandResult(command, args[0], res);
        return res;
      },
    },
  };
  const c = new LanguageClient('trtls', 'TensorRT Language Server', serverOptions, clientOptions);
  stock = c.createDefaultErrorHandler(MAX_RESTARTS);
  c.registerFeature(new ToastProgressFeature(c, log, onProgressEnd));
  clientSubs.push(c.onNotification(BUILD_TREE_NOTIFICATION, (params: unknown) => {
    const before = model.get(String((params as { buildId?: unknown })?.buildId))?.status;
    const b = model.update(params);
    if (b === undefined) {
      log.warn(`ignored malformed ${BUILD_TREE_NOTIFICATION}: ${JSON.stringify(params)}`);
    }
    refreshBuildState();
    if (b !== undefined && before !== b.status) {
      refreshServerCodeLenses(c);  // the server's lenses switch between ▶ Build and ■ Stop
    }
  }));
  clientSubs.push(c.onDidChangeState((e) => {
    if (e.newState !== State.Stopped) return;
    if (client === c) {
      // Not stopped by us (stopClient forgets the client first): the server process died. Its running builds
      // will never report their end; the restarted server's orphan recovery cleans their files up.
      const lost = model.markLost('the trtls server stopped during this build; the next server cleans up after it and records it as killed');
      if (lost.length > 0) log.warn(`server stopped during ${lost.map((b) => `${b.engine} (${b.buildId})`).join(', ')}: marked lost`);
    } else {
      model.clear();
    }
    refreshBuildState();
  }));
  client = c;
  await c.start();
  const info = c.initializeResult?.serverInfo;
  serverDescription = `${info?.name ?? '?'} ${info?.version ?? '?'} (${python})`;
  log.info(`server started: ${serverDescription}`);
  const expected = String((ctx.extension.packageJSON as { version?: string }).version ?? '0.0.0');
  const check = checkServerVersion(expected, info);
  if (!check.ok) {
    log.warn(check.message);
    void vscode.window.showWarningMessage(`TensorRT: ${check.message}`);
  }
}

function offerRestartAfterCrashes(detail: string | undefined): void {
  log.error(detail ?? 'the trtls server crashed repeatedly and is not restarted');
  void vscode.window.showErrorMessage(
    `TensorRT: the trtls server crashed ${MAX_RESTARTS + 1} times in the last 3 minutes and was not restarted again. ` +
    'See the output "TensorRT Language Server" for why.', 'Restart Server', 'Show Log')
    .then((a) => {
      if (a === 'Restart Server') void restart('restart after crashes');
      if (a === 'Show Log') log.show();
    });
}

const END_ICON: Record<EndKind, string> = {
  ok: '$(check)', cancelled: '$(circle-slash)', failed: '$(warning)', refused: '$(warning)', other: '$(info)',
};

/** The end of a build's or a gates run's progress, told as the server classified it (its outcomeKind). A failure
 *  raises a warning; a gates refusal (hold, reject) only the status bar: the command's reply already says so. */
function onProgressEnd(title: string, message: string | undefined, kind: EndKind): void {
  const text = `${title}: ${message ?? 'done'}`;
  log.info(`progress end (${kind}) — ${text}`);
  if (kind === 'failed') {
    void vscode.window.showWarningMessage(`TensorRT: ${text}`);
  } else {
    vscode.window.setStatusBarMessage(`${END_ICON[kind]} ${text}`, 8000);
  }
}

/** Asks VS Code to re-query the server's code lenses (as a workspace/codeLens/refresh from the server would). */
function refreshServerCodeLenses(c: LanguageClient): void {
  try {
    const feature = c.getFeature(CodeLensRequest.method);
    for (const doc of vscode.workspace.textDocuments) {
      if (path.basename(doc.uri.fsPath) === 'trtls.toml') feature.getProvider(doc)?.onDidChangeCodeLensEmitter.fire();
    }
  } catch (e) {
    log.debug(`code lens refresh: ${String(e)}`);
  }
}

function refreshBuildState(): void {
  tree?.refresh();
  const running = model.running();
  void vscode.commands.executeCommand('setContext', 'trtls.isBuilding', running.length > 0);
  const text = statusBarText(running);
  if (text === undefined) {
    statusItem?.hide();
  } else if (statusItem !== undefined) {
    statusItem.text = text;
    statusItem.show();
  }
}

// ---------------------------------------------------------------- server commands

async function serverCommand<T>(command: string, arg: object): Promise<T> {
  await lifecycle;
  const c = client;
  if (c === undefined || !c.isRunning()) {
    throw new Error('the trtls server is not running (TensorRT: Restart Server, and see the output "TensorRT Language Server")');
  }
  log.info(`→ ${command} ${JSON.stringify(arg)}`);
  const res: unknown = await c.sendRequest(ExecuteCommandRequest.type, { command, arguments: [arg] });
  log.info(`← ${command} ${JSON.stringify(res)}`);
  return res as T;
}

async function findRecipe(arg: unknown): Promise<vscode.Uri | undefined> {
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

async function pickTarget(arg: unknown, key: 'engine' | 'route'): Promise<{ uri: string; name: string } | undefined> {
  const direct = targetArg(arg, key);
  if (direct !== undefined) return direct;
  const recipe = await findRecipe(arg);
  if (recipe === undefined) return undefined;
  const uri = recipe.toString();
  const targets = await serverCommand<ListTargetsResult>('trtls.listTargets', { uri });
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

async function buildEngine(arg?: unknown): Promise<void> {
  const t = await pickTarget(arg, 'engine');
  if (t === undefined) return;
  const a = { uri: t.uri, engine: t.name };
  await showCommandResult('trtls.buildEngine', a, await serverCommand<BuildResult>('trtls.buildEngine', a));
}

/** What the user sees after a server command, whether it ran from our UI or from a server code lens / quick fix. */
async function showCommandResult(command: string, arg: unknown, res: unknown): Promise<void> {
  if (typeof res !== 'object' || res === null) return;
  const a = (typeof arg === 'object' && arg !== null ? arg : {}) as Record<string, unknown>;
  switch (command) {
    case 'trtls.buildEngine': {
      const r = res as BuildResult;
      const engine = r.engine ?? stringOr(a.engine, '?');
      if (r.status === 'already_building') {
        void vscode.window.showInformationMessage(`TensorRT: ${engine} is already building.`);
      }
      if (r.buildId) {
        model.noteStarted(r.buildId, engine, stringOr(a.uri, ''));
        refreshBuildState();
      }
      if (vscode.workspace.getConfiguration('trtls').get<boolean>('showBuildsViewOnBuild', true)) {
        void vscode.commands.executeCommand('trtls.builds.focus').then(undefined, () => undefined);
      }
      break;
    }
    case 'trtls.buildMatrix': {
      // A build farm run: the server's notifications bring the parent and its cells; a refusal (no node has a label,
      // the cluster is unreachable) is also in Problems, on the recipe key.
      const r = res as { buildId?: string | null; status?: string; errors?: string[] };
      if (r.status === 'refused' || r.status === 'invalid_recipe') {
        void vscode.window.showWarningMessage(`TensorRT: the matrix was not started: ${(r.errors ?? []).join('; ')}`);
      } else if (vscode.workspace.getConfiguration('trtls').get<boolean>('showBuildsViewOnBuild', true)) {
        void vscode.commands.executeCommand('trtls.builds.focus').then(undefined, () => undefined);
      }
      break;
    }
    case 'trtls.cancelBuild':
      if ((res as CancelResult).accepted === false) {
        void vscode.window.showInformationMessage('TensorRT: that build is no longer running.');
      }
      break;
    case 'trtls.showEvidence':
      await openEvidence((res as EvidenceResult).path);
      break;
    case 'trtls.runGates': {
      const o = gatesOutcome(res, stringOr(a.route, '?'));
      log.info(`gates: ${o.text}`);
      if (o.level === 'info') {
        void vscode.window.showInformationMessage(`TensorRT: ${o.text}`);
      } else {
        void vscode.window.showWarningMessage(`TensorRT: ${o.text}`, ...(o.showProblems ? ['Show Problems'] : [])).then((x) => {
          if (x) void vscode.commands.executeCommand('workbench.actions.view.problems');
        });
      }
      break;
    }
    case 'trtls.printDebugInformation':
      log.info(stringOr((res as { text?: unknown }).text, JSON.stringify(res)));
      log.show(true);
      break;
    default:
      break;
  }
}

async function openEvidence(file: string | null | undefined): Promise<void> {
  if (!file) {
    void vscode.window.showInformationMessage('TensorRT: this build has no evidence.');
    return;
  }
  const uri = file.includes('://') ? vscode.Uri.parse(file) : vscode.Uri.file(file);
  await vscode.window.showTextDocument(uri, { preview: true });
}

function buildIdOf(arg: unknown): string | undefined {
  if (typeof arg !== 'object' || arg === null) return undefined;
  const o = arg as Partial<TreeElement> & { buildId?: unknown };
  return typeof o.buildId === 'string' ? o.buildId : undefined;
}

async function stopBuild(arg?: unknown): Promise<void> {
  let buildId = buildIdOf(arg);
  if (buildId === undefined) {
    let running = model.running().map((b) => ({ buildId: b.buildId, engine: b.engine }));
    if (running.length === 0) {
      const listed = await serverCommand<ListBuildsResult>('trtls.listBuilds', {});
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
  await showCommandResult('trtls.cancelBuild', { buildId }, await serverCommand<CancelResult>('trtls.cancelBuild', { buildId, source: 'ide_stop' }));
}

async function runGates(arg?: unknown): Promise<void> {
  const t = await pickTarget(arg, 'route');
  if (t === undefined) return;
  const a = { uri: t.uri, route: t.name };
  await showCommandResult('trtls.runGates', a, await serverCommand<GatesResult>('trtls.runGates', a));
}

/** The build a command acts on: the tree item it was run from, or one the user picks (newest first). */
async function pickFinishedBuild(arg: unknown, title: string): Promise<{ buildId: string; engine: string } | undefined> {
  const buildId = buildIdOf(arg);
  if (buildId !== undefined) return { buildId, engine: model.get(buildId)?.engine ?? buildId };
  const listed = await serverCommand<ListBuildsResult>('trtls.listBuilds', {});
  // only builds that kept their evidence (keep_evidence = false drops it)
  const done = listed.builds.filter((b) => b.status !== 'running' && b.evidencePath).reverse();
  if (done.length === 0) {
    void vscode.window.showInformationMessage('TensorRT: no finished build with evidence yet.');
    return undefined;
  }
  const p = await vscode.window.showQuickPick(
    done.map((b) => ({ label: b.engine, description: `${b.status} · ${b.buildId}`, buildId: b.buildId })),
    { title });
  return p === undefined ? undefined : { buildId: p.buildId, engine: p.label };
}

async function showTimeline(arg?: unknown): Promise<void> {
  const picked = await pickFinishedBuild(arg, 'TensorRT: Show Build Timeline');
  if (picked === undefined) return;
  const report = await serverCommand<BuildReportResult>('trtls.buildReport', { buildId: picked.buildId });
  showBuildTimeline(report, picked.engine);
}

async function showEvidence(arg?: unknown): Promise<void> {
  const buildId = (await pickFinishedBuild(arg, 'TensorRT: Show Build Evidence'))?.buildId;
  if (buildId === undefined) return;
  let file = model.get(buildId)?.evidencePath ?? null;
  if (file === null) {
    file = (await serverCommand<EvidenceResult>('trtls.showEvidence', { buildId })).path;
  }
  await openEvidence(file);
}

async function printDebugInformation(): Promise<void> {
  const res = await serverCommand<{ text: string }>('trtls.printDebugInformation', {});
  const ext = (ctx.extension.packageJSON as { version?: string }).version;
  const text = `trtls extension ${ext}, VS Code ${vscode.version}\nserver: ${serverDescription}\n\n${res.text}`;
  log.info(text);
  log.show(true);
}
