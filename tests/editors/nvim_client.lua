-- Drives Neovim's own LSP client (vim.lsp, Neovim >= 0.7) against `trtls serve --stdio` and writes what the
-- client saw as JSON. Run by tests/editors/test_real_clients.py; the user configuration is in docs/editors.md.
local recipe = vim.env.TRTLS_RECIPE
local out_path = vim.env.TRTLS_OUT
local cmd = vim.fn.json_decode(vim.env.TRTLS_CMD)

vim.cmd('edit ' .. vim.fn.fnameescape(recipe))
local bufnr = vim.api.nvim_get_current_buf()
local client_id = vim.lsp.start_client({
  name = 'trtls',
  cmd = cmd,
  root_dir = vim.fn.fnamemodify(recipe, ':h'),
})
vim.lsp.buf_attach_client(bufnr, client_id)

local result = { diagnostics = {} }
-- The server publishes the recipe's diagnostics after didOpen; wait for them (bounded, not timed: the test
-- asserts on what arrived, never on how fast).
result.diagnostics_arrived = vim.wait(120000, function() return #vim.diagnostic.get(bufnr) > 0 end, 50)
local client = vim.lsp.get_client_by_id(client_id)
result.server_name = client and client.server_capabilities and client.name or vim.NIL
result.execute_command_provider = client and client.server_capabilities.executeCommandProvider or vim.NIL

for _, d in ipairs(vim.diagnostic.get(bufnr)) do
  local lsp = d.user_data and d.user_data.lsp or {}
  table.insert(result.diagnostics, {
    lnum = d.lnum, col = d.col, severity = d.severity, message = d.message, code = d.code or lsp.code or vim.NIL,
  })
end

local uri = vim.uri_from_bufnr(bufnr)
local targets = client.request_sync('workspace/executeCommand',
  { command = 'trtls.listTargets', arguments = { { uri = uri } } }, 60000, bufnr)
result.targets = targets and targets.result or vim.NIL

-- A TOML file that is not a recipe, attached to the same client the way a filetype-based config does it:
-- the server must leave it alone (no diagnostics), whatever its content.
local other = vim.env.TRTLS_OTHER_TOML
vim.cmd('edit ' .. vim.fn.fnameescape(other))
local other_buf = vim.api.nvim_get_current_buf()
vim.lsp.buf_attach_client(other_buf, client_id)
-- A round trip on the same connection after didOpen: any diagnostics for the file would have been sent first.
client.request_sync('workspace/executeCommand', { command = 'trtls.listBuilds', arguments = { {} } }, 60000, other_buf)
vim.wait(500, function() return false end, 50)
result.other_toml_diagnostics = #vim.diagnostic.get(other_buf)

vim.fn.writefile({ vim.fn.json_encode(result) }, out_path)
client.stop()
vim.wait(5000, function() return client.is_stopped() end, 50)
vim.cmd('qa!')
