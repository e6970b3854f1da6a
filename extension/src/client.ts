// The server's lifecycle: start `<python> -m trtls serve`, restart it on a settings or interpreter change, after a
// crash (the language client's own handler, then an offer to restart), stop it; and send it commands, typed by the
// generated protocol (trtls.core.wire).
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import {
  CloseAction, CloseHandlerResult, CodeLensRequest, ErrorHandler, ExecuteCommandRequest, LanguageClient, LanguageClientOptions,
  RevealOutputChannelOn, ServerOptions, State,
} from 'vscode-languageclient/node';
import { BUILD_TREE_NOTIFICATION, BuildTreeModel } from './buildTree';
import { CommandName, Commands } from './generated/protocol';
import { ToastProgressFeature } from './progressUi';
import { interpreterFromPythonExtension } from './python';
import { checkServerVersion, expandPath, initializationOptions, readSettings, resolvePython, TrtlsSettings } from './settings';
import { BuildViews } from './views';

export const RECIPE_GLOB = '**/trtls.toml';
// what the server re-checks a recipe for when it changes on disk (server/trtls/lsp/watched_files.py WATCHED_GLOBS)
export const WATCHED_GLOBS = [
  RECIPE_GLOB, '**/trtls.promotions.jsonl', '**/.trtls/routes/*/summary.json',
  '**/*.onnx', '**/*.onnx.data', '**/*.onnx_data',
];

/** Crashes the language client restarts before it gives up (its default; 5 crashes within 3 minutes stop it). */
const MAX_RESTARTS = 4;

/** What to do with a command's reply, whether it was run from our UI or from a server code lens / quick fix. */
export type CommandResultHandler = (command: string, arg: unknown, reply: unknown) => Promise<void>;

export function currentSettings(log: vscode.LogOutputChannel): TrtlsSettings {
  const cfg = vscode.workspace.getConfiguration('trtls');
  const { settings, problems } = readSettings((k) => cfg.get(k));
  for (const p of problems) {
    log.warn(p);
    void vscode.window.showWarningMessage(`TensorRT: ${p}`);
  }
  return settings;
}

export class ServerClient {
  private client: LanguageClient | undefined;
  private clientSubs: vscode.Disposable[] = [];
  private lifecycle: Promise<void> = Promise.resolve();
  private lastPython = 'python3';
  description = '';
  onCommandResult: CommandResultHandler = () => Promise.resolve();

  constructor(
    private readonly ctx: vscode.ExtensionContext,
    private readonly log: vscode.LogOutputChannel,
    private readonly model: BuildTreeModel,
    private readonly views: BuildViews,
  ) {}

  /** Serialises start/stop so settings changes in quick succession do not race. */
  restart(reason: string): Promise<void> {
    this.lifecycle = this.lifecycle.then(async () => {
      await this.stop();
      await this.start(reason);
    }).catch((e) => {
      this.log.error(`server start failed: ${String(e)}`);
      void vscode.window.showErrorMessage(
        `TensorRT: the trtls server did not start with ${this.lastPython} (${e instanceof Error ? e.message : String(e)}). ` +
        'Set trtls.python to a Python where trtls is installed (pip install trtls).', 'Show Log', 'Open Settings')
        .then((a) => {
          if (a === 'Show Log') this.log.show();
          if (a === 'Open Settings') void vscode.commands.executeCommand('workbench.action.openSettings', 'trtls.python');
        });
    });
    return this.lifecycle;
  }

  async stop(): Promise<void> {
    const c = this.client;
    this.client = undefined;
    for (const d of this.clientSubs) d.dispose();
    this.clientSubs = [];
    if (c !== undefined) {
      try {
        await c.stop(8000);
      } catch (e) {
        this.log.warn(`stopping the server: ${String(e)}`);
      }
      await c.dispose().catch(() => undefined);
    }
    this.model.clear();
    this.views.refresh();
  }

  /** One server command, its argument and reply typed by the protocol. */
  async command<C extends CommandName>(command: C, arg: Commands[C]['arguments']): Promise<Commands[C]['reply']> {
    await this.lifecycle;
    const c = this.client;
    if (c === undefined || !c.isRunning()) {
      throw new Error('the trtls server is not running (TensorRT: Restart Server, and see the output "TensorRT Language Server")');
    }
    this.log.info(`→ ${command} ${JSON.stringify(arg)}`);
    const res: unknown = await c.sendRequest(ExecuteCommandRequest.type, { command, arguments: [arg] });
    this.log.info(`← ${command} ${JSON.stringify(res)}`);
    return res as Commands[C]['reply'];
  }

  private async start(reason: string): Promise<void> {
    const log = this.log;
    const settings = currentSettings(log);
    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const configured = expandPath(settings.python, { workspaceFolder: cwd, home: os.homedir(), env: process.env });
    const { python, source } = resolvePython(configured, configured === '' ? await interpreterFromPythonExtension(log) : undefined);
    this.lastPython = python;
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
      // the recipe, and what its lenses and diagnostics rest on: the promotion ledger, each route's last gates record,
      // the ONNX models (and their external data) its engines name: the server's lsp/watched_files.WATCHED_GLOBS
      synchronize: { fileEvents: WATCHED_GLOBS.map((glob) => vscode.workspace.createFileSystemWatcher(glob)) },
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
            this.offerRestartAfterCrashes(r.message);
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
          await this.onCommandResult(command, args[0], res);
          return res;
        },
      },
    };
    const c = new LanguageClient('trtls', 'TensorRT Language Server', serverOptions, clientOptions);
    stock = c.createDefaultErrorHandler(MAX_RESTARTS);
    c.registerFeature(new ToastProgressFeature(c, log, (t, m, k) => this.views.progressEnded(t, m, k)));
    this.clientSubs.push(c.onNotification(BUILD_TREE_NOTIFICATION, (params: unknown) => {
      const before = this.model.get(String((params as { buildId?: unknown })?.buildId))?.status;
      const b = this.model.update(params);
      if (b === undefined) {
        log.warn(`ignored malformed ${BUILD_TREE_NOTIFICATION}: ${JSON.stringify(params)}`);
      }
      this.views.refresh();
      if (b !== undefined && before !== b.status) {
        refreshServerCodeLenses(c, log);  // the server's lenses switch between ▶ Build and ■ Stop
      }
    }));
    this.clientSubs.push(c.onDidChangeState((e) => {
      if (e.newState !== State.Stopped) return;
      if (this.client === c) {
        // Not stopped by us (stop() forgets the client first): the server process died. Its running builds
        // will never report their end; the restarted server's orphan recovery cleans their files up.
        const lost = this.model.markLost('the trtls server stopped during this build; the next server cleans up after it and records it as killed');
        if (lost.length > 0) log.warn(`server stopped during ${lost.map((b) => `${b.engine} (${b.buildId})`).join(', ')}: marked lost`);
      } else {
        this.model.clear();
      }
      this.views.refresh();
    }));
    this.client = c;
    await c.start();
    const info = c.initializeResult?.serverInfo;
    this.description = `${info?.name ?? '?'} ${info?.version ?? '?'} (${python})`;
    log.info(`server started: ${this.description}`);
    const expected = String((this.ctx.extension.packageJSON as { version?: string }).version ?? '0.0.0');
    const check = checkServerVersion(expected, info);
    if (!check.ok) {
      log.warn(check.message);
      void vscode.window.showWarningMessage(`TensorRT: ${check.message}`);
    }
  }

  private offerRestartAfterCrashes(detail: string | undefined): void {
    this.log.error(detail ?? 'the trtls server crashed repeatedly and is not restarted');
    void vscode.window.showErrorMessage(
      `TensorRT: the trtls server crashed ${MAX_RESTARTS + 1} times in the last 3 minutes and was not restarted again. ` +
      'See the output "TensorRT Language Server" for why.', 'Restart Server', 'Show Log')
      .then((a) => {
        if (a === 'Restart Server') void this.restart('restart after crashes');
        if (a === 'Show Log') this.log.show();
      });
  }
}

/** Asks VS Code to re-query the server's code lenses (as a workspace/codeLens/refresh from the server would). */
function refreshServerCodeLenses(c: LanguageClient, log: vscode.LogOutputChannel): void {
  try {
    const feature = c.getFeature(CodeLensRequest.method);
    for (const doc of vscode.workspace.textDocuments) {
      if (path.basename(doc.uri.fsPath) === 'trtls.toml') feature.getProvider(doc)?.onDidChangeCodeLensEmitter.fire();
    }
  } catch (e) {
    log.debug(`code lens refresh: ${String(e)}`);
  }
}
