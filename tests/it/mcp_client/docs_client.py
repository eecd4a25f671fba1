"""Drives `strata mcp --docs-path DIR` with the official Python MCP SDK, as a client would.

Usage: docs_client.py STRATA_BINARY DOCS_DIR MODE   (MODE: legacy, the initialize handshake of
docs-mcp's clients, or auto, the SDK's default). Prints one JSON object: the server's name, the
tool names, and the text of each call, keyed by a label. Exits non-zero on any failure.
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters

CALLS = [
    ("list", "list_documentation_files", {}),
    ("toc", "table_of_contents", {"fileId": "f1"}),
    ("read", "read_sections", {"fileId": "f1", "section_ids": ["1/1"]}),
    ("section_toc", "section_table_of_contents", {"fileId": "f1", "section_ids": ["1"]}),
    ("search", "search", {"query": "token"}),
    ("search_file", "search", {"query": "token", "fileId": "f2"}),
    ("invalid_id", "table_of_contents", {"fileId": "file1"}),
    ("bad_regex", "search", {"query": "(unclosed"}),
]


async def main(binary, docs_dir, mode):
    params = StdioServerParameters(command=binary, args=["mcp", "--docs-path", docs_dir], env={})
    out = {"calls": {}, "is_error": {}}
    async with Client(params, mode=mode) as client:
        info = client.session.server_info if client.session else None
        out["server"] = info.name if info else None
        tools = await client.list_tools()
        out["tools"] = [tool.name for tool in tools.tools]
        for label, name, arguments in CALLS:
            result = await client.call_tool(name, arguments)
            (content,) = result.content
            assert content.type == "text", content
            out["calls"][label] = content.text
            out["is_error"][label] = bool(result.is_error)
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
