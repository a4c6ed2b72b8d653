"""Binds a Gradio session to the browser the server issued a secret to (issue 13 item 2)."""

COOKIE = "arena-session"
COOKIE_LAX = "arena-session-lax"
