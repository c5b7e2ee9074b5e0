"""One module per tab of the web UI: each `build` lays out its components and wires them to handlers."""
