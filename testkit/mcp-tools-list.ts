/**
 * The tools testkit/mcp-tools-server.ts lists (name, description, JSON Schema of the arguments),
 * plain data in a file of their own: the testkit's front door exports their names without loading
 * the MCP server SDK (the demo's start-up loads the front door before it starts a node).
 */

const NO_ARGS = { type: 'object', properties: {} } as const;

const tool = (name: string, description: string, inputSchema: object = NO_ARGS) => ({ name, description, inputSchema });
/** Every tool of the conformance server, in the order it lists them. */
export const TOOLS = [
  tool('test_simple_text', 'Returns simple text content'),
  tool('test_image_content', 'Returns image content (a 1x1 PNG)'),
  tool('test_audio_content', 'Returns audio content (WAV)'),
  tool('test_embedded_resource', 'Returns an embedded resource'),
  tool('test_multiple_content_types', 'Returns text, image and resource content'),
  tool('test_tool_with_logging', 'Sends three log messages while it runs'),
  tool('test_error_handling', 'Always fails (isError)'),
  tool('test_tool_with_progress', 'Reports progress 0, 50, 100 of 100'),
  tool('test_sampling', 'Asks the client for an LLM completion', {
    type: 'object',
    properties: { prompt: { type: 'string' } },
    required: ['prompt'],
  }),
  tool('test_elicitation', 'Asks the client for user input', {
    type: 'object',
    properties: { message: { type: 'string' } },
    required: ['message'],
  }),
  tool('test_input_required_result_elicitation', 'Asks for a name (one elicitation), then greets'),
  tool('test_input_required_result_sampling', 'Asks for a completion (one sampling request)'),
  tool('test_input_required_result_list_roots', "Asks for the client's roots"),
  tool('test_input_required_result_request_state', 'Asks for a confirmation with a sealed requestState'),
  tool('test_input_required_result_multiple_inputs', 'Asks for an elicitation, a completion and the roots at once'),
  tool('test_input_required_result_multi_round', 'Asks twice (two rounds), then completes'),
  tool('test_input_required_result_tampered_state', 'Asks with a sealed requestState; a tampered one is refused'),
  tool('test_input_required_result_capabilities', 'Asks only for what the client declared'),
  tool('test_missing_capability', "Needs the client's sampling capability"),
  tool('test_logging_tool', 'Logs at the requested logLevel only'),
  tool('test_streaming_elicitation', 'Asks for input through an input_required result'),
];

/** The names of every tool this server lists (to grant them all to an agent behind a node). */
export const CONFORMANCE_TOOL_NAMES: readonly string[] = TOOLS.map((t) => t.name);
