//! The MCP server (`pantheon mcp`): the engine's tools over stdio.
