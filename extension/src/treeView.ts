// The "TensorRT Builds" tree view over BuildTreeModel.
import * as vscode from 'vscode';
import { BuildTreeModel, IconKind, TreeElement } from './buildTree';

const ICONS: Record<IconKind, vscode.ThemeIcon> = {
  running: new vscode.ThemeIcon('sync~spin'),
  ok: new vscode.ThemeIcon('pass', new vscode.ThemeColor('testing.iconPassed')),
  cancelled: new vscode.ThemeIcon('circle-slash'),
  error: new vscode.ThemeIcon('error', new vscode.ThemeColor('problemsErrorIcon.foreground')),
  warning: new vscode.ThemeIcon('warning', new vscode.ThemeColor('problemsWarningIcon.foreground')),
  pending: new vscode.ThemeIcon('circle-outline'),
};

export class BuildTreeProvider implements vscode.TreeDataProvider<TreeElement> {
  private readonly emitter = new vscode.EventEmitter<TreeElement | undefined>();
  readonly onDidChangeTreeData = this.emitter.event;

  constructor(private readonly model: BuildTreeModel) {}

  refresh(): void {
    this.emitter.fire(undefined);
  }

  getChildren(el?: TreeElement): TreeElement[] {
    return this.model.children(el);
  }

  getTreeItem(el: TreeElement): vscode.TreeItem {
    const v = this.model.view(el);
    if (v === undefined) {
      return new vscode.TreeItem('?');
    }
    const running = el.kind === 'build' && this.model.get(el.buildId)?.status === 'running';
    // Running builds are always expanded (phases arrive after the first notification); finished ones collapse.
    const item = new vscode.TreeItem(
      v.label,
      running ? vscode.TreeItemCollapsibleState.Expanded
        : !v.collapsible ? vscode.TreeItemCollapsibleState.None
          : el.kind === 'phase' ? vscode.TreeItemCollapsibleState.Expanded
            : vscode.TreeItemCollapsibleState.Collapsed,
    );
    // The id includes the status so a build that finishes is re-created (collapsed) instead of keeping its state.
    item.id = el.kind === 'build' ? `build:${el.buildId}:${running ? 'r' : 'f'}`
      : el.kind === 'pendingCell' ? `pending:${el.buildId}:${el.cell}`
        : `phase:${el.buildId}:${el.phaseId}:${v.collapsible ? 'c' : 'l'}`;
    item.description = v.description;
    item.tooltip = v.tooltip;
    item.iconPath = ICONS[v.icon];
    item.contextValue = v.contextValue;
    if (v.openEvidence && el.kind === 'build') {
      item.command = { command: 'trtls.ui.showEvidence', title: 'Show Build Evidence', arguments: [el] };
    }
    return item;
  }

  getParent(el: TreeElement): TreeElement | undefined {
    if (el.kind === 'pendingCell') return { kind: 'build', buildId: el.buildId };
    if (el.kind === 'build') {
      const parentId = this.model.get(el.buildId)?.parentId;  // a cell's parent is its matrix
      return parentId ? { kind: 'build', buildId: parentId } : undefined;
    }
    const p = this.model.phase(el.buildId, el.phaseId);
    const parent = p?.parentId ?? null;  // the server sends every phase's parent
    return parent === null ? { kind: 'build', buildId: el.buildId } : { kind: 'phase', buildId: el.buildId, phaseId: parent };
  }
}
