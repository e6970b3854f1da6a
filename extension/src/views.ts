// What the user sees of builds outside the tree items: the TensorRT Builds view, the status bar, the end of a
// progress. All of it renders the model, which holds what the server sent.
import * as vscode from 'vscode';
import { BuildTreeModel, statusBarText } from './buildTree';
import { EndKind } from './progress';
import { BuildTreeProvider } from './treeView';

const END_ICON: Record<EndKind, string> = {
  ok: '$(check)', cancelled: '$(circle-slash)', failed: '$(warning)', refused: '$(warning)', other: '$(info)',
};

export class BuildViews {
  private readonly tree: BuildTreeProvider;
  private readonly statusItem: vscode.StatusBarItem;

  constructor(context: vscode.ExtensionContext, readonly model: BuildTreeModel, private readonly log: vscode.LogOutputChannel) {
    this.tree = new BuildTreeProvider(model);
    const view = vscode.window.createTreeView('trtls.builds', { treeDataProvider: this.tree, showCollapseAll: true });
    this.statusItem = vscode.window.createStatusBarItem('trtls.builds', vscode.StatusBarAlignment.Left, 50);
    this.statusItem.name = 'TensorRT builds';
    this.statusItem.command = 'trtls.ui.stopBuild';
    this.statusItem.tooltip = 'TensorRT build running — click to stop';
    context.subscriptions.push(view, this.statusItem);
    void vscode.commands.executeCommand('setContext', 'trtls.isBuilding', false);
  }

  /** The tree, the Stop/Build buttons' context key and the status bar, after the model changed. */
  refresh(): void {
    this.tree.refresh();
    const running = this.model.running();
    void vscode.commands.executeCommand('setContext', 'trtls.isBuilding', running.length > 0);
    const text = statusBarText(running);
    if (text === undefined) {
      this.statusItem.hide();
    } else {
      this.statusItem.text = text;
      this.statusItem.show();
    }
  }

  /** The end of a build's or a gates run's progress, told as the server classified it (its outcomeKind). A failure
   *  raises a warning; a gates refusal (hold, reject) only the status bar: the command's reply already says so. */
  progressEnded(title: string, message: string | undefined, kind: EndKind): void {
    const text = `${title}: ${message ?? 'done'}`;
    this.log.info(`progress end (${kind}) — ${text}`);
    if (kind === 'failed') {
      void vscode.window.showWarningMessage(`TensorRT: ${text}`);
    } else {
      vscode.window.setStatusBarMessage(`${END_ICON[kind]} ${text}`, 8000);
    }
  }
}
