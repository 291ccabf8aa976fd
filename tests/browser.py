"""A real headless Chromium for the tests, driven over the DevTools protocol (CDP).

The browser is Debian's `chromium` (scripts/setup_browser.sh, the test set-up's step, installs it); nothing here downloads one. CDP runs over
`--remote-debugging-pipe`: Chromium reads commands from fd 3 and writes answers and events to fd 4, each
message JSON ended by a NUL byte, so no port is opened and no client library is needed.

    with Browser.start(profile_dir) as browser:
        page = browser.open("file:///tmp/report.html", color_scheme="dark")
        page.problems()          # console errors, uncaught exceptions, error log entries, network requests
        page.evaluate("document.title")
        page.screenshot(path)    # the whole page, as PNG
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Optional

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_SECONDS = 60.0


def find_chromium() -> Optional[str]:
    """The first Chromium on PATH, or None."""
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    pass


class Browser:
    """One Chromium process and its CDP pipe. Messages are read by a thread into a queue; events are kept
    per session so a page can list what happened while it loaded."""

    def __init__(self, process: subprocess.Popen, commands: int, answers: int, log_path: Path) -> None:
        self.process = process
        self._commands = commands
        self._answers = answers
        self.log_path = log_path
        self._next_id = 0
        self._responses: dict[int, dict] = {}
        self._events: dict[Optional[str], list[dict]] = {}
        self._arrived = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def start(cls, profile_dir: Path, executable: Optional[str] = None) -> "Browser":
        executable = executable or find_chromium()
        if executable is None:
            raise BrowserError("no chromium on PATH (Debian: apt-get install chromium)")
        profile_dir.mkdir(parents=True, exist_ok=True)
        to_browser_read, to_browser_write = os.pipe()
        from_browser_read, from_browser_write = os.pipe()

        def wire_pipe_fds() -> None:  # in the child, before exec: the pipe ends become fds 3 and 4
            read_end, write_end = os.dup(to_browser_read), os.dup(from_browser_write)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        args = [executable, "--headless", "--remote-debugging-pipe", f"--user-data-dir={profile_dir}",
                "--disable-gpu", "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-sync", "--disable-component-update",
                "--mute-audio", "--hide-scrollbars", "about:blank"]
        if os.geteuid() == 0:  # Chromium refuses to run as root with its sandbox (CI runs as root)
            args.insert(1, "--no-sandbox")
        log_path = profile_dir / "chromium.log"
        with open(log_path, "wb") as log:
            # its own process group: a browser that will not close is ended with its renderers
            process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                       pass_fds=(3, 4), preexec_fn=wire_pipe_fds, start_new_session=True)
        os.close(to_browser_read)
        os.close(from_browser_write)
        return cls(process, to_browser_write, from_browser_read, log_path)

    # -- the pipe ----------------------------------------------------------------------------------------
    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._answers, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._arrived:
                    self._arrived.notify_all()
                return
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            with self._arrived:
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        self._responses[message["id"]] = message
                    else:
                        self._events.setdefault(message.get("sessionId"), []).append(message)
                self._arrived.notify_all()

    def send(self, method: str, params: Optional[dict] = None, session: Optional[str] = None,
             timeout: float = TIMEOUT_SECONDS) -> dict:
        """Send one command and wait for its answer; BrowserError on a CDP error."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._arrived:
            while self._next_id not in self._responses:
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    raise BrowserError(f"{method}: no answer (browser log: {self.log_path})")
                self._arrived.wait(min(left, 0.5))
            answer = self._responses.pop(self._next_id)
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def events(self, session: Optional[str]) -> list[dict]:
        with self._arrived:
            return list(self._events.get(session, []))

    def wait_for_event(self, method: str, session: Optional[str], timeout: float = TIMEOUT_SECONDS) -> dict:
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                for event in self._events.get(session, []):
                    if event["method"] == method:
                        return event
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    raise BrowserError(f"no {method} event (browser log: {self.log_path})")
                self._arrived.wait(min(left, 0.5))

    # -- pages -------------------------------------------------------------------------------------------
    def open(self, url: str, *, color_scheme: str = "light", width: int = 1200, height: int = 900) -> "Page":
        """A new tab showing ``url`` with ``prefers-color-scheme`` emulated, after its load event."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setEmulatedMedia",
                  {"features": [{"name": "prefers-color-scheme", "value": color_scheme}]}, session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=session)
        navigation = self.send("Page.navigate", {"url": url}, session=session)
        if navigation.get("errorText"):
            raise BrowserError(f"{url}: {navigation['errorText']}")
        self.wait_for_event("Page.loadEventFired", session)
        return Page(self, session, url, width)

    def close(self) -> None:
        try:
            if self.process.poll() is None:
                self.send("Browser.close", timeout=10)
        except BrowserError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        for fd in (self._commands, self._answers):
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    def __init__(self, browser: Browser, session: str, url: str, width: int) -> None:
        self.browser = browser
        self.session = session
        self.url = url
        self.width = width

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (JSON-serialisable); BrowserError if it throws."""
        result = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                        "awaitPromise": True}, session=self.session)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def problems(self) -> list[str]:
        """What a person would see in the DevTools console as a problem, plus every network request that
        is not for the page itself or a data: URL (a self-contained page makes none)."""
        found = []
        for event in self.browser.events(self.session):
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
                found.append(f"console.{params['type']}: " + " ".join(str(a.get("value", a.get("description")))
                                                                      for a in params.get("args", [])))
            elif method == "Runtime.exceptionThrown":
                found.append(f"uncaught: {params['exceptionDetails'].get('text')} "
                             f"{params['exceptionDetails'].get('exception', {}).get('description', '')}")
            elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                entry = params["entry"]
                found.append(f"log {entry['level']} ({entry.get('source')}): {entry.get('text')} "
                             f"{entry.get('url', '')}")
            elif method == "Network.requestWillBeSent":
                requested = params["request"]["url"]
                if requested != self.url and not requested.startswith("data:"):
                    found.append(f"network request: {requested}")
        return found

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        """The whole page (or only the viewport) as a PNG at ``path``."""
        if full_page:
            metrics = self.browser.send("Page.getLayoutMetrics", session=self.session)
            height = int(metrics["cssContentSize"]["height"]) + 1
            self.browser.send("Emulation.setDeviceMetricsOverride",
                              {"width": self.width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                              session=self.session)
        shot = self.browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": full_page},
                                 session=self.session)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
