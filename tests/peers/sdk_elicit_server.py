"""The MCP server code people write most: the official MCP Python SDK (mcp 2.3.0)
with ``ctx.elicit(...)`` inside a tool.

``ctx.elicit`` sends a server-to-client ``elicitation/create`` while the call is in
flight, which only the handshake eras (2025-11-25, 2025-06-18) allow; reached in
the 2026-07-28 era the SDK refuses the call with -32600 (no back-channel). Tool
``book_shipment(weight_kg)`` asks for a delivery address and answers
``booked <weight> kg to <street>, <city>`` (or ``declined`` / ``cancelled``).

Usage: ``sdk_elicit_server.py`` (stdio) or ``sdk_elicit_server.py --http PORT``.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

mcp = MCPServer("m3-sdk-elicit-peer", version="1.0.0")


class Address(BaseModel):
    street: str = Field(description="Street and number")
    city: str = Field(description="City")


@mcp.tool()
async def book_shipment(weight_kg: float, ctx: Context) -> str:
    """Book a shipment; asks for the delivery address."""
    answer = await ctx.elicit("Enter the delivery address.", schema=Address)
    if answer.action == "accept":
        return f"booked {weight_kg:g} kg to {answer.data.street}, {answer.data.city}"
    return answer.action + "d" if answer.action == "decline" else "cancelled"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        mcp.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        mcp.run()
