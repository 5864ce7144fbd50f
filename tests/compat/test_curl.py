"""tests/compat/test_curl.py — llmd driven by curl, the way the README and
operators' shell scripts call it.

curl is the client under test here (its TLS verification with --cacert, its
-N unbuffered streaming, -w '%{http_code}'); Python only starts the daemon
and parses what curl printed.  Every call has --max-time so that a server
that never answers fails the test instead of hanging it.
"""

import json
import subprocess
import tempfile
import unittest

import harness

D = None


def setUpModule():
    global D
    D = harness.Daemon(tenants={"alice": []})


def tearDownModule():
    if D is not None:
        D.shutdown_checked()


def curl(*args, check=True):
    """Runs curl; returns (exit code, stdout, stderr)."""
    argv = ["curl", "-sS", "--max-time", "60", "--cacert", D.cert] + list(args)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=90)
    if check and p.returncode != 0:
        raise AssertionError("curl exited %d: %s" % (p.returncode, p.stderr))
    return p.returncode, p.stdout, p.stderr


def auth():
    return ["-H", "Authorization: Bearer " + D.keys["alice"]]


def chat_body(**kw):
    body = {"model": D.model, "max_tokens": 12,
            "messages": [{"role": "user", "content": "Say hello."}]}
    body.update(kw)
    return json.dumps(body)


class TestCurl(harness.DaemonTestCase):
    @classmethod
    def setUpClass(cls):
        cls.daemon = D

    def test_health(self):
        _, out, _ = curl(D.url + "/health")
        self.assertEqual(json.loads(out), {"status": "ok"})

    def test_models(self):
        _, out, _ = curl(D.url + "/v1/models", *auth())
        r = json.loads(out)
        self.assertEqual(r["object"], "list")
        self.assertIn(D.model, [m["id"] for m in r["data"]])

    def test_chat_json(self):
        with tempfile.NamedTemporaryFile("r", suffix=".hdr") as hdr:
            _, out, _ = curl(D.url + "/v1/chat/completions", *auth(),
                             "-H", "Content-Type: application/json", "-D", hdr.name,
                             "-d", chat_body())
            headers = hdr.read()
        r = json.loads(out)
        self.assertEqual(r["object"], "chat.completion")
        msg = r["choices"][0]["message"]
        self.assertEqual(msg["role"], "assistant")
        self.assertIsInstance(msg["content"], str)
        self.assertIn(r["choices"][0]["finish_reason"], ("stop", "length"))
        u = r["usage"]
        self.assertEqual(u["total_tokens"], u["prompt_tokens"] + u["completion_tokens"])
        self.assertLessEqual(u["completion_tokens"], 12)
        self.assertRegex(headers, r"(?im)^HTTP/1\.1 200")
        self.assertRegex(headers, r"(?im)^content-type: application/json")
        fields = dict((k.strip().lower(), v.strip()) for k, _, v in
                      (ln.partition(":") for ln in headers.splitlines()[1:] if ":" in ln))
        self.assertEqual(fields.get("llmd-request-id"), r["id"])

    def test_chat_stream(self):
        _, out, _ = curl("-N", D.url + "/v1/chat/completions", *auth(),
                         "-H", "Content-Type: application/json",
                         "-d", chat_body(stream=True, stream_options={"include_usage": True}))
        lines = [ln for ln in out.split("\n") if ln.strip()]
        self.assertGreaterEqual(len(lines), 3, out)
        for ln in lines:
            self.assertTrue(ln.startswith("data: "), repr(ln))
        self.assertEqual(lines[-1], "data: [DONE]")
        events = [json.loads(ln[len("data: "):]) for ln in lines[:-1]]
        for ev in events:
            self.assertEqual(ev["object"], "chat.completion.chunk")
        self.assertEqual(events[-1]["choices"], [])
        self.assertIn("completion_tokens", events[-1]["usage"])
        finishes = [c["finish_reason"] for ev in events for c in ev["choices"]
                    if c.get("finish_reason")]
        self.assertEqual(len(finishes), 1)

    def test_completions_stream(self):
        body = json.dumps({"model": D.model, "prompt": "The sky is", "max_tokens": 8,
                           "stream": True})
        _, out, _ = curl("-N", D.url + "/v1/completions", *auth(),
                         "-H", "Content-Type: application/json", "-d", body)
        lines = [ln for ln in out.split("\n") if ln.strip()]
        self.assertEqual(lines[-1], "data: [DONE]")
        for ln in lines[:-1]:
            self.assertEqual(json.loads(ln[len("data: "):])["object"], "text_completion")

    def test_bad_key_401(self):
        _, out, _ = curl("-o", "/dev/null", "-w", "%{http_code}",
                         D.url + "/v1/chat/completions", "-H", "Authorization: Bearer sk-llmd-bad",
                         "-H", "Content-Type: application/json", "-d", chat_body())
        self.assertEqual(out, "401")

    def test_missing_key_401_json(self):
        with tempfile.NamedTemporaryFile("r", suffix=".json") as body:
            _, code, _ = curl("-o", body.name, "-w", "%{http_code}",
                              D.url + "/v1/chat/completions",
                              "-H", "Content-Type: application/json", "-d", chat_body())
            err = json.loads(body.read())["error"]
        self.assertEqual(code, "401")
        self.assertTrue(err["message"])

    def test_unknown_path_404_and_wrong_method_405(self):
        _, code, _ = curl("-o", "/dev/null", "-w", "%{http_code}", *auth(),
                          D.url + "/v1/no-such-thing")
        self.assertEqual(code, "404")
        _, code, _ = curl("-o", "/dev/null", "-w", "%{http_code}", *auth(),
                          D.url + "/v1/chat/completions")
        self.assertEqual(code, "405")

    def test_metrics_without_key(self):
        _, out, _ = curl(D.url + "/metrics")
        self.assertIn('llmd_kv_blocks_total{pool="device"}', out)

    def test_certificate_is_verified(self):
        # without --cacert the self-signed certificate is refused by curl
        p = subprocess.run(["curl", "-sS", "--max-time", "30", D.url + "/health"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 60, p.stderr)  # CURLE_PEER_FAILED_VERIFICATION

    def test_plain_http_to_tls_port_is_closed(self):
        p = subprocess.run(["curl", "-sS", "--max-time", "20",
                            "http://127.0.0.1:%d/health" % D.port],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertNotEqual(p.returncode, 28, "plain HTTP on the TLS port hung until timeout")
        self.assertEqual(D.get("/health")[0], 200)


if __name__ == "__main__":
    unittest.main(verbosity=2)
