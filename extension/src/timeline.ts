// "Show Build Timeline": the server's HTML report of a finished build (`trtls report`), in a webview.
// The page is self-contained (inline CSS and SVG, no script, CSP default-src 'none'), so the webview
// runs no script and loads nothing.
import * as vscode from 'vscode';
import { BuildReportReply } from './generated/protocol';

const panels = new Map<string, vscode.WebviewPanel>();

export function showBuildTimeline(report: BuildReportReply, engine: string): vscode.WebviewPanel {
  let panel = panels.get(report.buildId);
  if (panel === undefined) {
    panel = vscode.window.createWebviewPanel(
      'trtls.buildTimeline', `Timeline: ${engine}`, vscode.ViewColumn.Active,
      { enableScripts: false, enableFindWidget: true, localResourceRoots: [] });
    const id = report.buildId;
    panel.onDidDispose(() => panels.delete(id));
    panels.set(id, panel);
  }
  panel.webview.html = report.html;
  panel.reveal();
  return panel;
}
