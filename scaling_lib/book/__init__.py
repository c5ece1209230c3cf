"""What exists because this is a book: the exercises and their checker (`exercises`), the claims ledger (`claims`),
one plotting style (`plotting`), Markdown tables and other display helpers (`display`), and the set-up every
notebook starts with (`notebook`).

`from scaling_lib.book import check, solution` is how readers reach the checker."""

from .exercises import check, solution

__all__ = ["check", "solution"]
