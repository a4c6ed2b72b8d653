"""The compiled parts: the hottest step of indexing a vote, its index row
(webui/leaderboard/votes/_rows.c), and the board's online Elo (webui/leaderboard/stats/_elo.c).
Three more (the identity check's token scan, the word count, the language detector's ASCII path)
were measured idle once the features were written with each vote, and dropped (docs/performance.md).
Optional: where they do not compile, the install goes on and the modules that use them fall back
to their Python versions (the same results; tests/unit compare the two). Everything else about the package is in pyproject.toml."""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class BuildExtByRename(build_ext):
    """A built module goes into the tree (`--inplace`, `pip install -e`) as a new file renamed over
    the old one, where distutils would write over the old file itself: every process that has that
    one loaded (the app, a catch-up's worker processes and the fork server they come from) would run
    code changing under it, and die (SIGSEGV or SIGBUS: issue 37, defect 10). After a rename they
    keep the old file; the next start loads the new one."""

    def copy_file(self, infile, outfile, *args, **kwargs):
        staged = f"{outfile}.{os.getpid()}.new"
        try:
            _, copied = super().copy_file(infile, staged, *args, **kwargs)
            os.replace(staged, outfile)
        finally:
            if os.path.exists(staged):
                os.unlink(staged)
        return outfile, copied


setup(
    cmdclass={"build_ext": BuildExtByRename},
    ext_modules=[
        Extension("webui.leaderboard.stats._elo", ["webui/leaderboard/stats/_elo.c"], optional=True),
        Extension("webui.leaderboard.votes._rows", ["webui/leaderboard/votes/_rows.c"], optional=True),
    ],
)
