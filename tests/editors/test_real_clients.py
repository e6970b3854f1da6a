"""The language server under editors other than VS Code, each driven through its own real LSP client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .conftest import require_tool

# A recipe with one located error: the client must show TRT102 on the `optimization_level` value.
RECIPE = """[engines.demo]
onnx = "demo.onnx"
output = "out/demo.engine"

[engines.demo.builder]
optimization_level = 9
"""
SERVER = [sys.executable, "-m", "trtls", "serve", "--stdio"]


def test_neovim_builtin_client_gets_located_diagnostics_and_runs_a_command(tmp_path: Path) -> None:
    nvim = require_tool("nvim")
    recipe = tmp_path / "trtls.toml"
    recipe.write_text(RECIPE)
    out = tmp_path / "nvim.json"
    cargo = tmp_path / "Cargo.toml"
    cargo.write_text('[package]\nname = "not-a-recipe"\n[engines.x]\noptimization_level = 9\n')
    env = dict(os.environ, TRTLS_RECIPE=str(recipe), TRTLS_OUT=str(out), TRTLS_CMD=json.dumps(SERVER))
    env["TRTLS_OTHER_TOML"] = str(cargo)
    script = Path(__file__).with_name("nvim_client.lua")
    proc = subprocess.run(
        [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {script}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert out.exists(), f"nvim wrote nothing (rc {proc.returncode}): {proc.stderr[-2000:]}"
    seen = json.loads(out.read_text())
    assert seen["diagnostics_arrived"] is True
    assert seen["execute_command_provider"]["commands"], "the server advertised no commands"
    by_code = {d["code"]: d for d in seen["diagnostics"]}
    assert "TRT102" in by_code, seen["diagnostics"]
    d = by_code["TRT102"]
    # 0-based: line 5 is `optimization_level = 9`; the range starts at the value.
    assert (d["lnum"], d["col"]) == (5, RECIPE.splitlines()[5].index("9"))
    assert d["severity"] == 1  # vim.diagnostic.severity.ERROR
    assert "demo" in seen["targets"]["engines"]
    assert seen["other_toml_diagnostics"] == 0


EGLOT_DRIVER = r"""
(require 'eglot)
(require 'json)
(defvar trtls-seen nil)
(advice-add 'eglot-handle-notification :before
  (lambda (_server method &rest params)
    (when (eq method 'textDocument/publishDiagnostics)
      (push (plist-get params :diagnostics) trtls-seen))))
(let* ((recipe (getenv "TRTLS_RECIPE"))
       (contact (json-read-from-string (getenv "TRTLS_CMD")))
       (default-directory (file-name-directory recipe)))
  (find-file recipe)
  (conf-toml-mode)
  (let ((project (cons 'transient default-directory)))
    ;; eglot connects asynchronously; the server's first publishDiagnostics follows didOpen.
    (eglot '(conf-toml-mode) project 'eglot-lsp-server (append contact nil) "toml")
    (let ((deadline (+ (float-time) 120)))
      (while (and (null trtls-seen) (< (float-time) deadline))
        (accept-process-output nil 0.1)))
    (let* ((server (eglot-current-server))
           (uri (eglot--path-to-uri recipe))
           (targets (jsonrpc-request server :workspace/executeCommand
                                     (list :command "trtls.listTargets"
                                           :arguments (vector (list :uri uri))))))
      (with-temp-file (getenv "TRTLS_OUT")
        (insert (json-encode (list :diagnostics (car trtls-seen) :targets targets))))
      (eglot-shutdown server))))
(kill-emacs 0)
"""


def test_emacs_eglot_gets_located_diagnostics_and_runs_a_command(tmp_path: Path) -> None:
    emacs = require_tool("emacs")
    recipe = tmp_path / "trtls.toml"
    recipe.write_text(RECIPE)
    out = tmp_path / "eglot.json"
    driver = tmp_path / "driver.el"
    driver.write_text(EGLOT_DRIVER)
    env = dict(os.environ, TRTLS_RECIPE=str(recipe), TRTLS_OUT=str(out), TRTLS_CMD=json.dumps(SERVER))
    # Debian's elpa-eglot installs under /usr/share/emacs/site-lisp/elpa; --batch skips site-start, so load it.
    proc = subprocess.run(
        [emacs, "--batch", "-l", "package", "--eval", "(package-initialize)", "-l", str(driver)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert out.exists(), f"emacs wrote nothing (rc {proc.returncode}): {proc.stderr[-3000:]}"
    seen = json.loads(out.read_text())
    codes = {d.get("code"): d for d in seen["diagnostics"]}
    assert "TRT102" in codes, seen["diagnostics"]
    start = codes["TRT102"]["range"]["start"]
    assert (start["line"], start["character"]) == (5, RECIPE.splitlines()[5].index("9"))
    assert "demo" in seen["targets"]["engines"]
