"""A shared Space (Gradio-free): whose package is whose, quotas, ZeroGPU's rules, and the Hub."""
