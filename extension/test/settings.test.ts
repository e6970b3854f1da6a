import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { checkServerVersion, expandPath, initializationOptions, needsRestart, readSettings, resolvePython } from '../src/settings';

test('readSettings: defaults', () => {
  const { settings, problems } = readSettings(() => undefined);
  assert.deepEqual(settings, { python: '', builderModule: 'auto', cancelGraceS: null });
  assert.deepEqual(problems, []);
});

test('readSettings: values and bad values', () => {
  const good = readSettings((k) => ({ python: ' /venv/bin/python ', builderModule: 'tensorrt_rtx', cancelGraceS: 2.5 } as Record<string, unknown>)[k]);
  assert.deepEqual(good.settings, { python: '/venv/bin/python', builderModule: 'tensorrt_rtx', cancelGraceS: 2.5 });
  const bad = readSettings((k) => ({ python: 3, builderModule: 'trt', cancelGraceS: -1 } as Record<string, unknown>)[k]);
  assert.deepEqual(bad.settings, { python: '', builderModule: 'auto', cancelGraceS: null });
  assert.equal(bad.problems.length, 3);
});

test('initializationOptions opts in to the build tree and nests settings', () => {
  assert.deepEqual(initializationOptions({ python: 'p', builderModule: 'tensorrt', cancelGraceS: null }), {
    buildTree: true, settings: { builderModule: 'tensorrt', cancelGraceS: null },
  });
});

test('needsRestart ignores trace changes', () => {
  assert.equal(needsRestart((s) => s === 'trtls.trace.server'), false);
  assert.equal(needsRestart((s) => s === 'trtls.cancelGraceS'), true);
  assert.equal(needsRestart((s) => s === 'trtls.python'), true);
});

test('resolvePython precedence', () => {
  assert.equal(resolvePython('/x/python', '/y/python').python, '/x/python');
  assert.equal(resolvePython('', '/y/python').python, '/y/python');
  assert.equal(resolvePython('', undefined).python, 'python3');
});

test('checkServerVersion compares major.minor', () => {
  assert.deepEqual(checkServerVersion('0.1.0', { name: 'trtls', version: '0.1.7' }), { ok: true });
  assert.equal(checkServerVersion('0.1.0', { name: 'trtls', version: '0.2.0' }).ok, false);
  assert.equal(checkServerVersion('0.1.0', { name: 'trtls' }).ok, false);
  assert.equal(checkServerVersion('0.1.0', undefined).ok, false);
});

test('expandPath expands workspaceFolder, home and env', () => {
  const vars = { workspaceFolder: '/w', home: '/h', env: { VENV: '/v' } };
  assert.equal(expandPath('${workspaceFolder}/.venv/bin/python', vars), '/w/.venv/bin/python');
  assert.equal(expandPath('~/py/bin/python', vars), '/h/py/bin/python');
  assert.equal(expandPath('${userHome}/x', vars), '/h/x');
  assert.equal(expandPath('${env:VENV}/bin/python', vars), '/v/bin/python');
  assert.equal(expandPath('/usr/bin/python3', vars), '/usr/bin/python3');
  assert.equal(expandPath('a~b', vars), 'a~b');
});
