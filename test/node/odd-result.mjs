// The result the paged test server's `odd` tool returns (shared with the test that checks it).
/** What `odd` returns: mixed content, _meta, and a field no MCP schema defines (passed through as is). */
export const ODD = {
  content: [
    { type: 'audio', data: 'UklGRg==', mimeType: 'audio/wav' },
    { type: 'resource', resource: { uri: 'file:///x.txt', mimeType: 'text/plain', text: 'hi' } },
    { type: 'text', text: 'ünïcödé ✓' },
  ],
  isError: false,
  _meta: { trace: 'abc', ratio: 0.25 },
  vendorExtra: { deep: [1, 2.5, null, true] },
};
