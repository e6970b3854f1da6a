// Server-created progress (window/workDoneProgress/create) as a notification toast with Cancel.
// The stock client shows it only as a status-bar spinner; this feature is registered after the stock
// ProgressFeature, so its create handler is the one in force (also after an automatic restart).
import * as vscode from 'vscode';
import {
  BaseLanguageClient, ClientCapabilities, FeatureState, StaticFeature,
  WorkDoneProgress, WorkDoneProgressCancelNotification, WorkDoneProgressCreateParams, WorkDoneProgressCreateRequest,
} from 'vscode-languageclient';
import { EndKind, ProgressTracker, ProgressValue } from './progress';

export class ToastProgressFeature implements StaticFeature {
  private readonly active = new Map<string, { dispose(): void; finish(): void }>();

  constructor(
    private readonly client: BaseLanguageClient,
    private readonly log: vscode.LogOutputChannel,
    private readonly onEnd: (title: string, message: string | undefined, kind: EndKind) => void,
  ) {}

  getState(): FeatureState {
    return { kind: 'static' };
  }

  fillClientCapabilities(capabilities: ClientCapabilities): void {
    capabilities.window = capabilities.window ?? {};
    capabilities.window.workDoneProgress = true;
  }

  initialize(): void {
    this.client.onRequest(WorkDoneProgressCreateRequest.type, (params: WorkDoneProgressCreateParams) => {
      this.follow(params.token);
    });
  }

  clear(): void {
    for (const a of this.active.values()) a.finish();
    this.active.clear();
  }

  private follow(token: string | number): void {
    const key = String(token);
    const tracker = new ProgressTracker();
    let resolveDone: () => void = () => undefined;
    const done = new Promise<void>((r) => { resolveDone = r; });
    let report: ((v: { message?: string; increment?: number }) => void) | undefined;
    const pending: ProgressValue[] = [];
    let sub: vscode.Disposable | undefined;
    const finish = (): void => {
      sub?.dispose();
      this.active.delete(key);
      resolveDone();
    };
    const show = (): void => {
      void vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: tracker.title, cancellable: tracker.cancellable },
        async (progress, cancel) => {
          report = (v) => progress.report(v);
          cancel.onCancellationRequested(() => {
            this.log.info(`progress ${key}: Cancel clicked, sending window/workDoneProgress/cancel`);
            void this.client.sendNotification(WorkDoneProgressCancelNotification.type, { token });
          });
          for (const v of pending.splice(0)) handle(v);
          await done;
        },
      );
    };
    const handle = (v: ProgressValue): void => {
      const upd = tracker.apply(v);
      if (tracker.ended) {
        this.onEnd(tracker.title, tracker.endMessage, tracker.endKind);
        finish();
        return;
      }
      if (upd !== undefined && report !== undefined) {
        report({ message: upd.message, increment: upd.increment });
      }
    };
    sub = this.client.onProgress(WorkDoneProgress.type, token, (value) => {
      const v: ProgressValue = value;  // an end from trtls also carries outcome and outcomeKind (see ProgressEnd)
      if (v.kind === 'begin' && report === undefined) {
        tracker.title = v.title;
        tracker.cancellable = v.cancellable ?? false;
        pending.push(v);
        show();
        return;
      }
      if (report === undefined && v.kind !== 'end') {
        pending.push(v);
        return;
      }
      handle(v);
    });
    this.active.set(key, { dispose: () => { sub.dispose(); }, finish });
  }
}
