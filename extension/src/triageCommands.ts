// TensorRT: Find Where Another Model Diverges — `trtls.findDivergence {uri, engine, candidate}` (docs/triage.md,
// "Any two models"): the engine's ONNX is the reference, the model the user picks is the candidate. The candidate is
// sent as a file: URI and judged by the server like every uri (inside the workspace, or refused with one line); the
// search's progress, Cancel and its TRT981 result are the server's, like every other triage run.
import * as path from 'path';
import * as vscode from 'vscode';
import { RECIPE_GLOB, ServerClient } from './client';

export const FIND_MODEL_DIVERGENCE = 'trtls.ui.findModelDivergence';

/** The recipe the command is about: the Uri it was given, the active or a visible trtls.toml, else the first found. */
async function recipeOf(arg: unknown): Promise<vscode.Uri | undefined> {
  if (arg instanceof vscode.Uri && path.basename(arg.fsPath) === 'trtls.toml') return arg;
  const open = [vscode.window.activeTextEditor, ...vscode.window.visibleTextEditors].map((e) => e?.document.uri);
  const shown = open.find((u) => u !== undefined && path.basename(u.fsPath) === 'trtls.toml');
  if (shown !== undefined) return shown;
  const found = await vscode.workspace.findFiles(RECIPE_GLOB, '**/node_modules/**', 50);
  found.sort((a, b) => a.fsPath.localeCompare(b.fsPath));
  return found[0];
}

/** Pick the engine (its ONNX is the reference) and the candidate model, then start the search on the server. */
export async function findModelDivergence(server: ServerClient, arg?: unknown): Promise<void> {
  const recipe = await recipeOf(arg);
  if (recipe === undefined) {
    void vscode.window.showWarningMessage('TensorRT: no trtls.toml in this workspace.');
    return;
  }
  const uri = recipe.toString();
  const engines = (await server.command('trtls.listTargets', { uri })).engines ?? [];
  if (engines.length === 0) {
    void vscode.window.showWarningMessage(`TensorRT: ${vscode.workspace.asRelativePath(recipe)} has no engines.`);
    return;
  }
  const engine = engines.length === 1 ? engines[0] : await vscode.window.showQuickPick(engines, {
    title: 'TensorRT: Find Where Another Model Diverges',
    placeHolder: 'The engine whose ONNX is the reference',
  });
  if (engine === undefined) return;
  const picked = await vscode.window.showOpenDialog({
    title: `TensorRT: the model to compare with ${engine}'s ONNX`,
    defaultUri: vscode.Uri.file(path.dirname(recipe.fsPath)),
    canSelectMany: false,
    filters: { 'ONNX model': ['onnx'] },
  });
  const candidate = picked?.[0];
  if (candidate === undefined) return;
  await server.command('trtls.findDivergence', { uri, engine, candidate: candidate.toString() });
}

export function registerTriageCommands(ctx: vscode.ExtensionContext, log: vscode.LogOutputChannel, server: ServerClient): void {
  ctx.subscriptions.push(vscode.commands.registerCommand(FIND_MODEL_DIVERGENCE, async (arg?: unknown) => {
    try {
      await findModelDivergence(server, arg);
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      log.error(`${FIND_MODEL_DIVERGENCE} failed: ${msg}`);
      void vscode.window.showErrorMessage(`TensorRT: ${msg}`);
    }
  }));
}
