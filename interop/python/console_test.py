#!/usr/bin/env python3
"""The web console (docs/CONSOLE.md) driven in headless Chromium through Selenium, against
records a librdkafka (confluent-kafka) client really produced and a group it really ran:

1. The page, script and style sheet are served; a topic `console-demo` (3 partitions) is
   created through the create form and listed (the filter finds it); creating it again
   shows TOPIC_ALREADY_EXISTS in the message area.
2. 200 JSON records with keys and a header (and one that is not JSON) are produced; the
   message browser shows each at the offset the producer was acknowledged, with its key,
   value, header and timestamp, as text, pretty-printed JSON (the plain one as text with a
   note) and hex; the next page, newest and from-a-time starts. A transactional producer's
   aborted, committed and open transactions: read_uncommitted shows all their records,
   read_committed only the committed ones (up to the last stable offset).
3. retention.ms and max.message.bytes are set through the alter form, max.message.bytes
   deleted again; the config table shows what the broker then describes.
4. A group `console-group` commits part of the records; more are produced: the group page
   (refreshing itself) shows the exact lag, then 0 once the consumer has caught up, with
   points in its lag chart; a group whose id is markup shows as text. Its refresh stops
   when the page is left.
5. The throughput page lists console-demo with a rate above 0 while a producer runs.
6. A second topic is created and deleted through the page (confirm()) and is gone.
7. A broker with --console read-only: the badge shows, no create, alter or delete
   control, and POST /api/topics (application/json) answers 403; a form-encoded POST to a
   read-write broker creates nothing. With --console off: 404 for the page and the API.
8. A broker whose only listener is SASL_PLAINTEXT with ACLs: the page and the API answer
   401 without a sign-in or with a wrong password; signed in as bob (no ACLs) the browser
   shows no topic and creating one shows TOPIC_AUTHORIZATION_FAILED; signed in as alice
   (a super user) it creates one and lists it, and bob still does not see it.

Screenshots of each page go to docs/console/NAME.png (1280x900, reduced to 64 colours
when Pillow is installed). Needs chromium and chromedriver (CHROME_BIN, CHROMEDRIVER
override /usr/bin/chromium and /usr/bin/chromedriver) and the selenium package.
CONSOLE_ASSETS=DIR serves the page from DIR instead of the binary (a proxy in front of
the broker's HTTP listener), to try changes to the assets without a rebuild.
"""

import contextlib
import datetime
import http.server
import json
import math
import os
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from dataset import check, fail, ok
from http_broker import HttpBroker

HERE = os.path.dirname(os.path.abspath(__file__))
SHOTS = os.path.abspath(os.environ.get("CONSOLE_SCREENSHOTS", os.path.join(HERE, "../../docs/console")))
ASSETS = os.environ.get("CONSOLE_ASSETS")
TOPIC, THROWAWAY, GROUP, TXN_TOPIC = "console-demo", "console-throwaway", "console-group", "console-txn"
ODD_GROUP = '<i>console</i> & "group"'
RECORDS = 200
OTHER_TOPICS = [("orders", 6, 120), ("payments", 3, 40), ("clickstream", 12, 250)]  # name, partitions, msg/s
PROCESSES = []
CLIENTS = []


def log(message):
    print(message, flush=True)


def wait_for(what, predicate, timeout=30, interval=0.25):
    """predicate()'s first true value, polled until the deadline (exceptions count as not
    yet: the page re-renders under a refresh)."""
    deadline = time.time() + timeout
    last = None
    while True:
        try:
            value = predicate()
            if value:
                return value
            last = value
        except (WebDriverException, KeyError, IndexError, TypeError, ValueError) as e:
            last = e
        if time.time() > deadline:
            fail(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)


class Broker(HttpBroker):
    def __init__(self, root, *extra):
        super().__init__(root, *extra, fail=fail)
        PROCESSES.append(self.process)
        self.url = f"http://{self.http}"

    def request(self, method, path, body=None, content_type="application/json", authorization=None):
        """(status, parsed JSON or text) of one request to the HTTP listener."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if authorization:
            request.add_header("Authorization", authorization)
        if content_type and method != "GET":
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=15) as response:
                status, text = response.status, response.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def stop(self):
        self.process.terminate()
        try:
            code = self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            fail("the broker did not stop within 30 s of SIGTERM")
        check(code == 0, f"the broker stopped cleanly ({code})")
        errors = open(self.stderr_path).read() + open(self.log_path).read()
        check("panicked" not in errors, "no panic in the broker's log")


def asset_proxy(broker_url):
    """An HTTP server serving /, /console.js and /console.css from CONSOLE_ASSETS and
    forwarding everything else to the broker: the page as it is on disk, the broker's API."""
    files = {"/": ("index.html", "text/html"), "/console.js": ("console.js", "text/javascript"),
             "/console.css": ("console.css", "text/css")}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def forward(self):
            if self.path in files:
                name, content_type = files[self.path]
                status, headers, body = 200, {"Content-Type": content_type}, open(os.path.join(ASSETS, name), "rb").read()
            else:
                length = int(self.headers.get("Content-Length") or 0)
                request = urllib.request.Request(broker_url + self.path, method=self.command,
                                                 data=self.rfile.read(length) if length else None)
                if self.headers.get("Content-Type"):
                    request.add_header("Content-Type", self.headers["Content-Type"])
                try:
                    with urllib.request.urlopen(request, timeout=30) as response:
                        status, headers, body = response.status, dict(response.headers), response.read()
                except urllib.error.HTTPError as e:
                    status, headers, body = e.code, dict(e.headers), e.read()
            self.send_response(status)
            self.send_header("Content-Type", headers.get("Content-Type") or headers.get("content-type") or "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = forward

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    log(f"CONSOLE_ASSETS: the page from {ASSETS}, through http://127.0.0.1:{server.server_port}")
    return f"http://127.0.0.1:{server.server_port}"


class Page:
    """Headless Chromium on the console."""

    def __init__(self, url):
        self.url = url
        options = webdriver.ChromeOptions()
        options.binary_location = os.environ.get("CHROME_BIN", "/usr/bin/chromium")
        for argument in ("--no-sandbox", "--headless=new", "--window-size=1280,900", "--disable-gpu",
                         "--disable-dev-shm-usage"):
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(
            service=Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")), options=options)
        self.driver.set_page_load_timeout(30)
        self.driver.set_script_timeout(30)
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                    {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})

    def open(self, route, ready):
        """Loads the page at a hash route and waits for the CSS selector `ready`."""
        self.driver.get(f"{self.url}/{route}")
        self.wait_css(ready, f"{route}: {ready}")

    def go(self, route, ready):
        """Follows a hash route within the loaded page (no reload) and waits for `ready`."""
        self.driver.execute_script("location.hash = arguments[0]", route)
        self.wait_css(ready, f"{route}: {ready}")

    def wait_css(self, selector, what=None, timeout=30):
        return wait_for(what or selector, lambda: self.driver.find_elements(By.CSS_SELECTOR, selector), timeout)

    def find(self, selector):
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def all(self, selector):
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def text(self, selector):
        """textContent of the first match, None without one."""
        return self.driver.execute_script(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null", selector)

    def attr(self, selector, name):
        return self.driver.execute_script(
            "const e = document.querySelector(arguments[0]); return e ? e.getAttribute(arguments[1]) : null",
            selector, name)

    def type(self, selector, text):
        field = self.find(selector)
        field.clear()
        if text:
            field.send_keys(text)
        else:
            self.driver.execute_script("arguments[0].dispatchEvent(new Event('input', {bubbles: true}))", field)

    def errors(self):
        return [e.text for e in self.all("#flash .error .text")]

    def shot(self, name):
        os.makedirs(SHOTS, exist_ok=True)
        path = os.path.join(SHOTS, f"{name}.png")
        self.driver.execute_script("window.scrollTo(0, 0)")
        ActionChains(self.driver).move_to_element(self.find("h1")).perform()  # no link under the mouse
        png = self.driver.get_screenshot_as_png()
        try:
            import io
            from PIL import Image
            image = Image.open(io.BytesIO(png)).convert("RGB")
            image.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
        except ImportError:
            open(path, "wb").write(png)
        log(f"screenshot {path} ({os.path.getsize(path) // 1024} KiB)")

    def quit(self):
        self.driver.quit()


def other_topics(broker):
    """A few more topics (made with the admin client), for a livelier list and throughput."""
    admin = AdminClient({"bootstrap.servers": broker.kafka})
    for future in admin.create_topics([NewTopic(n, p, 1) for n, p, _ in OTHER_TOPICS]).values():
        future.result(30)
    ok(f"{len(OTHER_TOPICS)} more topics created with the admin client")


def produce_records(broker):
    """RECORDS JSON records with keys and a header, then one plain text record on
    partition 0: {(partition, offset): (key, value, timestamp)}."""
    producer = Producer({"bootstrap.servers": broker.kafka, "acks": "all", "linger.ms": 5})
    acknowledged = {}

    def delivered(error, message):
        if error is not None:
            fail(f"a record was not acknowledged: {error}")
        acknowledged[(message.partition(), message.offset())] = (
            message.key(), message.value(), message.timestamp()[1])

    for n in range(RECORDS):
        value = json.dumps({"n": n, "user": f"user-{n % 7}", "city": "Zürich", "tags": ["demo", str(n % 3)]},
                           ensure_ascii=False).encode()
        producer.produce(TOPIC, key=f"key-{n:03d}".encode(), value=value,
                         headers=[("source", b"console-test")], on_delivery=delivered)
    producer.flush(30)
    producer.produce(TOPIC, key=b"plain", value=b"plain text, not JSON", partition=0, on_delivery=delivered)
    left = producer.flush(30)
    check(left == 0 and len(acknowledged) == RECORDS + 1, f"{RECORDS + 1} records acknowledged")
    return acknowledged


def iso(ms):
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


ROWS_JS = """
return [...document.querySelectorAll('#messages-table tr[data-offset]')].map(tr => {
  const cell = (c) => tr.querySelector(`td[data-col=${c}]`);
  return {partition: +tr.dataset.partition, offset: +tr.dataset.offset,
          timestamp: cell('timestamp').textContent, key: cell('key').textContent,
          value: cell('value').querySelector('pre') ? cell('value').querySelector('pre').textContent : cell('value').textContent,
          note: !!cell('value').querySelector('.note'), headers: cell('headers').textContent};
});"""


def create_through_form(page, name, partitions, configs=""):
    if not page.find("#create-topic").get_attribute("open"):
        page.find("#create-topic summary").click()
    page.type("#create-topic-name", name)
    page.type("#create-topic-partitions", str(partitions))
    page.type("#create-topic-rf", "1")
    page.type("#create-topic-configs", configs)
    page.find("#create-topic-submit").click()


def topics_and_errors(page, broker):
    page.open("#/", "#brokers-table tr[data-broker]")
    status, overview = broker.request("GET", "/api/overview")
    check(status == 200 and overview.get("read_only") is False, "GET /api/overview: read_only false")
    check(page.text("#overview-cluster-id") == overview["cluster_id"],
          f"the overview shows cluster id {overview['cluster_id']}")
    rows = page.all("#brokers-table tr[data-broker]")
    check(len(rows) == 1 and page.text('#brokers-table tr[data-broker="1"] td[data-col=address]') == broker.kafka,
          f"the brokers table lists node 1 at {broker.kafka}")
    check(not page.find("#read-only-badge").is_displayed(), "no read-only badge")

    page.go("#/topics", "#topics-table")
    create_through_form(page, TOPIC, 3)
    wait_for("a created message", lambda: "created" in page.text("#flash .ok"))
    wait_for(f"{TOPIC} in the topic list", lambda: page.all(f'#topics-table tr[data-topic="{TOPIC}"]'))
    check(page.text(f'#topics-table tr[data-topic="{TOPIC}"] td[data-col=partitions]') == "3",
          f"{TOPIC} created through the form and listed with 3 partitions")
    status, detail = broker.request("GET", f"/api/topics/{TOPIC}")
    check(status == 200 and len(detail["partitions"]) == 3, f"GET /api/topics/{TOPIC}: 3 partitions")

    page.type("#topics-filter", "console-d")
    wait_for("the filter to apply", lambda: [r.get_attribute("data-topic") for r in page.all("#topics-table tr[data-topic]")] == [TOPIC])
    ok("the filter box narrows the list to console-demo")

    create_through_form(page, TOPIC, 3)
    error = wait_for("an error in the message area", lambda: page.errors())
    check("TOPIC_ALREADY_EXISTS" in error[0], f"creating it again shows the error: {error[0]!r}")


def message_browser(page, acknowledged):
    page.go(f"#/messages/{TOPIC}", "#messages-table")
    partitions = [o.get_attribute("value") for o in Select(page.find("#messages-partition")).options]
    check(partitions == ["0", "1", "2"], "the partition select offers 0, 1 and 2")
    on_zero = sorted(offset for partition, offset in acknowledged if partition == 0)
    check(len(on_zero) > 50, f"partition 0 holds {len(on_zero)} records (more than a page)")

    def load(start, limit=50, partition="0", offset=None, when=None):
        select = Select(page.find("#messages-partition"))
        if select.first_selected_option.get_attribute("value") != partition:
            select.select_by_value(partition)  # loads by itself: let that land first
            wait_for(f"partition {partition} loaded", lambda: page.text("#messages-info").startswith(f"partition {partition}:"))
        Select(page.find("#messages-start")).select_by_value(start)
        if offset is not None:
            page.type("#messages-offset", str(offset))
        if when is not None:
            page.driver.execute_script("document.getElementById('messages-timestamp').value = arguments[0]", when)
        page.type("#messages-limit", str(limit))
        page.driver.execute_script("document.getElementById('messages-table').remove()")
        page.find("#messages-load").click()
        page.wait_css("#messages-table")
        return page.driver.execute_script(ROWS_JS)

    Select(page.find("#messages-format")).select_by_value("text")
    rows = load("offset", offset=0)
    check([r["offset"] for r in rows] == on_zero[:50], "from offset 0: the first 50 offsets of partition 0")
    for row in rows:
        key, value, timestamp = acknowledged[(0, row["offset"])]
        if (row["key"], row["value"], row["timestamp"]) != (key.decode(), value.decode(), iso(timestamp)):
            fail(f"offset {row['offset']}: shown {row}, produced {key!r} {value!r} at {iso(timestamp)}")
        if "source: console-test" not in row["headers"]:
            fail(f"offset {row['offset']}: header not shown: {row['headers']!r}")
    ok("text view: key, value, timestamp (ISO) and header of each record as produced")

    Select(page.find("#messages-format")).select_by_value("json")
    rows = page.driver.execute_script(ROWS_JS)
    for row in rows:
        value = acknowledged[(0, row["offset"])][1]
        pretty = json.dumps(json.loads(value), indent=2, ensure_ascii=False)
        if row["value"] != pretty or row["note"]:
            fail(f"JSON view of offset {row['offset']}: {row['value']!r}, expected {pretty!r}")
    ok("JSON view: every value pretty-printed, UTF-8 decoded")
    page.shot("messages")

    Select(page.find("#messages-format")).select_by_value("hex")
    rows = page.driver.execute_script(ROWS_JS)
    for row in rows:
        key, value, _ = acknowledged[(0, row["offset"])]
        if row["value"] != value.hex(" ") or row["key"] != key.hex(" "):
            fail(f"hex view of offset {row['offset']}: {row['key']!r} {row['value']!r}")
    ok("hex view: keys and values as hex bytes")

    Select(page.find("#messages-format")).select_by_value("text")
    page.find("#messages-next").click()
    rows = wait_for("the next page", lambda: (lambda r: r if r and r[0]["offset"] == on_zero[50] else None)(
        page.driver.execute_script(ROWS_JS)))
    check([r["offset"] for r in rows] == on_zero[50:100], f"next page: offsets {on_zero[50]}..{on_zero[min(99, len(on_zero) - 1)]}")

    rows = load("newest", limit=5)
    check([r["offset"] for r in rows] == on_zero[-5:], "newest 5: the last five offsets of partition 0")
    Select(page.find("#messages-format")).select_by_value("json")
    rows = page.driver.execute_script(ROWS_JS)
    check(rows[-1]["value"] == "plain text, not JSON" and rows[-1]["note"],
          "JSON view of a value that is not JSON: the text, with a note")
    check(page.find("#messages-info").text.startswith("partition 0"), f"info line: {page.find('#messages-info').text!r}")

    first = min(acknowledged[(0, o)][2] for o in on_zero)
    when = datetime.datetime.fromtimestamp(first / 1000 - 60).strftime("%Y-%m-%dT%H:%M:%S")
    rows = load("timestamp", limit=10, partition="1", when=when)
    on_one = sorted(offset for partition, offset in acknowledged if partition == 1)
    check([r["offset"] for r in rows] == on_one[:10], f"partition 1 from {when} (a minute before the first record): offsets from 0")
    Select(page.find("#messages-format")).select_by_value("text")


def transactions(page, broker):
    """A transactional producer aborts three records, commits two and leaves one open:
    read_uncommitted shows all six, read_committed the two committed ones and nothing
    past the open transaction (the last stable offset)."""
    admin = AdminClient({"bootstrap.servers": broker.kafka})
    for future in admin.create_topics([NewTopic(TXN_TOPIC, 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": broker.kafka, "transactional.id": "console-txn"})
    producer.init_transactions(30)
    for outcome, count in (("aborted", 3), ("committed", 2), ("open", 1)):
        producer.begin_transaction()
        for i in range(count):
            producer.produce(TXN_TOPIC, key=f"{outcome}-{i}", value=f"{outcome} {i}")
        producer.flush(30)
        if outcome == "aborted":
            producer.abort_transaction(30)
        elif outcome == "committed":
            producer.commit_transaction(30)

    def shown(isolation):
        page.go(f"#/messages/{TXN_TOPIC}", "#messages-table")
        Select(page.find("#messages-isolation")).select_by_value(isolation)
        Select(page.find("#messages-start")).select_by_value("offset")
        page.type("#messages-offset", "0")
        page.driver.execute_script("document.getElementById('messages-table').remove()")
        page.find("#messages-load").click()
        page.wait_css("#messages-table")
        return [r["key"] for r in page.driver.execute_script(ROWS_JS)]

    everything = shown("read_uncommitted")
    check(everything == ["aborted-0", "aborted-1", "aborted-2", "committed-0", "committed-1", "open-0"],
          f"read_uncommitted: every record, aborted and open ones too ({everything})")
    committed = shown("read_committed")
    check(committed == ["committed-0", "committed-1"],
          f"read_committed: only the committed transaction's records ({committed})")
    info = page.text("#messages-info")
    check("last stable" in info, f"the info line gives the last stable offset: {info!r}")
    status, answer = broker.request("GET", f"/api/topics/{TXN_TOPIC}/messages?offset=0&isolation=read_committed")
    check(status == 200 and answer["last_stable_offset"] < answer["high_watermark"]
          and answer["isolation"] == "read_committed",
          f"GET .../messages?isolation=read_committed: last stable {answer.get('last_stable_offset')}"
          f" < high watermark {answer.get('high_watermark')}")
    status, answer = broker.request("GET", f"/api/topics/{TXN_TOPIC}/messages?isolation=dirty")
    check(status == 400, f"an unknown isolation: 400 ({answer})")
    producer.commit_transaction(30)
    del producer
    check(wait_for("the open transaction's record, once committed", lambda: "open-0" in shown("read_committed")),
          "read_committed: the last transaction's record once it commits")


def alter_configs(page, broker):
    page.go(f"#/topics/{TOPIC}", "#configs-table")
    page.type("#alter-config-set", "retention.ms=3600000\nmax.message.bytes=2000000")
    page.find("#alter-config-submit").click()
    cell = 'tr[data-config="{}"] td[data-col={}]'
    wait_for("retention.ms in the config table",
             lambda: page.text("#configs-table " + cell.format("retention.ms", "value")) == "3600000")
    check(page.text("#configs-table " + cell.format("retention.ms", "source")) == "DYNAMIC_TOPIC_CONFIG"
          and page.text("#configs-table " + cell.format("max.message.bytes", "value")) == "2000000",
          "the config table shows retention.ms=3600000 and max.message.bytes=2000000 (DYNAMIC_TOPIC_CONFIG)")
    page.type("#alter-config-delete", "max.message.bytes")
    page.find("#alter-config-submit").click()
    wait_for("max.message.bytes to leave the non-default configs",
             lambda: page.all('#configs-table tr[data-config="retention.ms"]')
             and not page.all('#configs-table tr[data-config="max.message.bytes"]'))
    page.find("#configs-show-all").click()
    check(page.text("#configs-table " + cell.format("max.message.bytes", "source")) == "DEFAULT_CONFIG",
          "deleted max.message.bytes: back to its default (shown with all configs)")
    page.find("#configs-show-all").click()
    _, detail = broker.request("GET", f"/api/topics/{TOPIC}")
    described = {c["name"]: c for c in detail["configs"]}
    check(described["retention.ms"]["value"] == "3600000" and described["max.message.bytes"]["source"] == "DEFAULT_CONFIG",
          "GET /api/topics/console-demo agrees")


def group_lag(page, broker, acknowledged):
    total = len(acknowledged)
    consumer = Consumer({"bootstrap.servers": broker.kafka, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "client.id": "console-test"})
    CLIENTS.append(consumer)
    consumer.subscribe([TOPIC])
    position = {0: 0, 1: 0, 2: 0}

    def consume(count):
        """Reads `count` records, then commits where it is on every partition (0 where
        it read nothing yet, so that each has a committed offset and a lag)."""
        seen, deadline = 0, time.time() + 60
        while seen < count and time.time() < deadline:
            for message in consumer.consume(min(50, count - seen), 1.0):
                if message.error() is None:
                    seen += 1
                    position[message.partition()] = message.offset() + 1
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in position.items()], asynchronous=False)
        return seen

    consumed = consume(120)
    check(consumed == 120, f"{GROUP} consumed 120 of {total} records and committed {position}")
    producer = Producer({"bootstrap.servers": broker.kafka, "acks": "all"})
    for n in range(150):
        producer.produce(TOPIC, key=f"more-{n}".encode(), value=json.dumps({"more": n}).encode())
    check(producer.flush(30) == 0, "150 more records produced")
    total += 150
    expected = total - consumed

    page.go(f"#/groups/{GROUP}", "#group-lag")
    wait_for(f"the group page to show lag {expected}",
             lambda: page.attr("#group-lag", "data-lag") == str(expected), timeout=60)
    wait_for(f"the lag chart to reach {expected} (lag_history sampled)",
             lambda: page.attr("#lag-chart", "data-last") == str(expected), timeout=60)
    ok(f"the page shows lag {expected} and its lag chart has reached it")
    check(page.text("#group-state") == "Stable", f"{GROUP} is Stable")
    members = [m.text for m in page.all("#group-members tr[data-member]")]
    check(len(members) == 1 and TOPIC in members[0], f"one member, assigned {TOPIC}: {members!r}")
    lags = [int(e.get_attribute("data-lag")) for e in page.all("#group-offsets td[data-col=lag]")]
    check(len(lags) == 3 and sum(lags) == expected, f"offsets table: lag per partition {lags}, {expected} in all")

    points = int(page.attr("#lag-chart", "data-points"))
    wait_for("one more lag sample", lambda: int(page.attr("#lag-chart", "data-points")) > points, timeout=30)
    check(consume(100) == 100, f"{GROUP} consumed 100 more")
    wait_for(f"the lag chart to come down to {expected - 100}",
             lambda: page.attr("#lag-chart", "data-last") == str(expected - 100), timeout=60)
    check(consume(expected - 100) == expected - 100, f"{GROUP} consumed the other {expected - 100}")
    wait_for("the group page to show lag 0 and its lag chart to come back to 0",
             lambda: page.attr("#group-lag", "data-lag") == "0" and page.attr("#lag-chart", "data-last") == "0"
             and page.attr("#lag-chart", "data-max") == str(expected), timeout=60)
    ok(f"lag {expected}, then 0 once consumed, without reloading; "
       f"the lag chart has {page.attr('#lag-chart', 'data-points')} points, up to {expected} and back to 0")
    page.shot("group")

    # Its refresh stops when the page is left.
    page.driver.execute_script("""
        window.__calls = [];
        if (!window.__fetch) { window.__fetch = window.fetch;
          window.fetch = (...a) => { window.__calls.push(String(a[0])); return window.__fetch(...a); }; }""")
    page.go("#/groups", f'#groups-table tr[data-group="{GROUP}"]')
    time.sleep(6.5)
    calls = page.driver.execute_script("return window.__calls")
    check(not [c for c in calls if c.startswith("/api/groups/")], f"no group refresh after leaving its page: {calls}")

    odd = Consumer({"bootstrap.servers": broker.kafka, "group.id": ODD_GROUP, "enable.auto.commit": False})
    odd.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    odd.close()
    page.type("#groups-filter", "console")
    row = wait_for("the markup-named group", lambda: [r for r in page.all("#groups-table tr[data-group]")
                                                    if r.get_attribute("data-group") == ODD_GROUP])
    check(row[0].find_element(By.CSS_SELECTOR, "a").text == ODD_GROUP and not page.all("#groups-table i"),
          "a group id with markup shows as text")
    row[0].find_element(By.CSS_SELECTOR, "a").click()
    wait_for("its page", lambda: page.text("#group-name") == ODD_GROUP)
    ok("its page opens by its (encoded) id")
    page.go("#/groups", f'#groups-table tr[data-group="{GROUP}"]')
    page.type("#groups-filter", "")
    wait_for("the unfiltered group list", lambda: len(page.all("#groups-table tr[data-group]")) >= 2)
    page.shot("groups")
    return consumer


def throughput(page, broker):
    """A producer writes to console-demo and the other topics at rates that vary."""
    stop = threading.Event()
    rates = {TOPIC: 400, **{name: rate for name, _, rate in OTHER_TOPICS}}

    def keep_producing():
        producer = Producer({"bootstrap.servers": broker.kafka, "linger.ms": 20})
        start = time.time()
        n = 0
        while not stop.is_set() and time.time() < start + 150:
            wave = 1 + 0.6 * math.sin((time.time() - start) / 6)
            for topic, rate in rates.items():
                for _ in range(max(1, int(rate * wave / 10))):
                    producer.produce(topic, key=str(n % 97).encode(), value=json.dumps({"tick": n}).encode())
                    n += 1
            producer.poll(0)
            time.sleep(0.1)
        producer.flush(30)

    thread = threading.Thread(target=keep_producing, daemon=True)
    thread.start()
    try:
        page.go("#/throughput", "#throughput-table")
        rate = wait_for(f"{TOPIC} with a rate above 0 on the throughput page", lambda: float(
            page.attr(f'#throughput-table tr[data-topic="{TOPIC}"]', "data-rate") or 0), timeout=60)
        check(rate > 0, f"the throughput page lists {TOPIC} at {rate:.0f} msg/s while a producer runs")
        listed = wait_for("the other topics on the throughput page", lambda: all(
            float(page.attr(f'#throughput-table tr[data-topic="{name}"]', "data-rate") or 0) > 0
            for name, _, _ in OTHER_TOPICS), timeout=30)
        check(listed, "the other topics being written are listed with their rates")
        time.sleep(20)  # some history for the charts and the screenshots
        check(float(page.attr(f'#throughput-table tr[data-topic="{TOPIC}"] svg', "data-max") or 0) > 0,
              f"{TOPIC}'s chart has risen above 0 (refreshed without a reload)")
        page.shot("throughput")
        page.go(f"#/topics/{TOPIC}", "#topic-throughput-chart")
        wait_for("the topic's throughput chart", lambda: int(page.attr("#topic-throughput-chart", "data-points")) >= 3)
        check(float(page.attr("#topic-throughput-chart", "data-last") or 0) > 0, "the topic page's chart shows the rate")
        page.shot("topic")
    finally:
        stop.set()
        thread.join(60)


def delete_through_page(page, broker):
    page.go("#/topics", "#topics-table")
    page.type("#topics-filter", "")
    create_through_form(page, THROWAWAY, 1)
    page.wait_css(f'#topics-table tr[data-topic="{THROWAWAY}"]', f"{THROWAWAY} listed")
    page.find(f'#topics-table tr[data-topic="{THROWAWAY}"] a').click()
    page.wait_css("#delete-topic")
    page.find("#delete-topic").click()
    alert = wait_for("the confirm() dialog", lambda: page.driver.switch_to.alert, timeout=10)
    check(THROWAWAY in alert.text, f"confirm() asks: {alert.text!r}")
    alert.accept()
    wait_for("the topic list after the delete", lambda: page.driver.current_url.endswith("#/topics")
             and page.all("#topics-table"))
    wait_for(f"{THROWAWAY} to leave the list", lambda: not page.all(f'#topics-table tr[data-topic="{THROWAWAY}"]')
             and page.all(f'#topics-table tr[data-topic="{TOPIC}"]'))
    check("deleted" in (page.text("#flash .ok") or ""), "deleted through the page; a message says so")
    wait_for(f"GET /api/topics/{THROWAWAY} to answer 404",
             lambda: broker.request("GET", f"/api/topics/{THROWAWAY}")[0] == 404, timeout=30)
    ok(f"GET /api/topics/{THROWAWAY}: 404")
    page.shot("topics")
    page.go("#/", "#brokers-table tr[data-broker]")
    page.shot("overview")


def refused_without_json(broker):
    status, answer = broker.request("POST", "/api/topics", b"name=console-form&partitions=1",
                                     content_type="application/x-www-form-urlencoded")
    check(400 <= status < 500 and "error" in answer,
          f"POST /api/topics as a form (not application/json): {status} {answer}")
    check(broker.request("GET", "/api/topics/console-form")[0] == 404, "and no topic console-form")


def read_only(root):
    broker = Broker(os.path.join(root, "read-only"), "--console", "read-only")
    page = None
    try:
        admin = AdminClient({"bootstrap.servers": broker.kafka})
        for future in admin.create_topics([NewTopic("ro-topic", 1, 1)]).values():
            future.result(30)
        status, overview = broker.request("GET", "/api/overview")
        check(status == 200 and overview.get("read_only") is True, "GET /api/overview: read_only true")
        page = Page(ASSETS and asset_proxy(broker.url) or broker.url)
        page.open("#/topics", '#topics-table tr[data-topic="ro-topic"]')
        check(page.find("#read-only-badge").is_displayed(), "the read-only badge shows")
        check(not page.all("#create-topic-form") and not page.all("#create-topic-submit"), "no create form")
        page.go("#/topics/ro-topic", "#configs-table")
        check(not page.all("#alter-config-form") and not page.all("#delete-topic"), "no alter form, no delete button")
        status, answer = broker.request("POST", "/api/topics", {"name": "ro-made", "partitions": 1,
                                                                 "replication_factor": 1, "configs": {}})
        check(status == 403 and "error" in answer, f"POST /api/topics (application/json): {status} {answer}")
        status, answer = broker.request("POST", "/api/topics/ro-topic/configs", {"set": {"retention.ms": "1000"}, "delete": []})
        check(status == 403, f"POST /api/topics/ro-topic/configs: {status} {answer}")
        status, answer = broker.request("DELETE", "/api/topics/ro-topic")
        check(status == 403, f"DELETE /api/topics/ro-topic: {status} {answer}")
        check(broker.request("GET", "/api/topics/ro-made")[0] == 404
              and broker.request("GET", "/api/topics/ro-topic")[0] == 200, "nothing created or deleted")
    finally:
        if page:
            page.quit()
    broker.stop()


def basic(user, password):
    import base64
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def signed_in(root):
    """The console of a broker that only takes SASL logins, in the browser as two people
    (HTTP Basic sent by Chromium itself through the DevTools protocol, as it would after
    its sign-in prompt)."""
    directory = os.path.join(root, "signed-in")
    os.makedirs(directory, exist_ok=True)
    controller = free_port()
    properties = os.path.join(directory, "server.properties")
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
    with open(properties, "w") as out:
        out.write("\n".join([
            "process.roles=broker,controller", "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{controller}",
            f"listeners=SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{controller}",
            "controller.listener.names=CONTROLLER", "inter.broker.listener.name=SASL_PLAINTEXT",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms=PLAIN", "sasl.mechanism.inter.broker.protocol=PLAIN",
            f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin;User:alice", "offsets.topic.replication.factor=1",
            f"log.dirs={os.path.join(directory, 'logs')}", ""]))
    broker = Broker(directory, "--config", properties)
    page = None
    try:
        for path in ("/", "/api/overview"):
            status, _ = broker.request("GET", path)
            check(status == 401, f"GET {path} without a sign-in: {status}")
        status, _ = broker.request("GET", "/api/overview", authorization=basic("alice", "wrong"))
        check(status == 401, f"a wrong password: {status}")

        page = Page(ASSETS and asset_proxy(broker.url) or broker.url)
        page.driver.execute_cdp_cmd("Network.enable", {})

        def sign_in(user, password):
            """Sends `user`'s password from now on, and loads the topic list afresh."""
            page.driver.execute_cdp_cmd("Network.setExtraHTTPHeaders",
                                        {"headers": {"Authorization": basic(user, password)}})
            page.driver.get("about:blank")
            page.open("#/topics", "#create-topic-form")

        sign_in("bob", "bob-secret")
        wait_for("the topic list (empty for bob)", lambda: page.text("#topics-table") is not None)
        check(not page.all("#topics-table tr[data-topic]"), "bob sees no topic")
        create_through_form(page, "bobs-topic", 1)
        error = wait_for("an error in the message area", lambda: page.errors())
        check("AUTHORIZATION_FAILED" in error[0], f"bob may not create a topic: {error[0]!r}")

        sign_in("alice", "alice-secret")
        create_through_form(page, "alices-topic", 2)
        wait_for("a created message", lambda: "created" in (page.text("#flash .ok") or ""))
        wait_for("alices-topic in alice's topic list",
                 lambda: page.all('#topics-table tr[data-topic="alices-topic"]'))
        check(page.text('#topics-table tr[data-topic="alices-topic"] td[data-col=partitions]') == "2",
              "alice (a super user) creates alices-topic through the form and sees it listed")

        sign_in("bob", "bob-secret")
        wait_for("the topic list", lambda: page.text("#topics-table") is not None)
        check(not page.all("#topics-table tr[data-topic]"), "bob still sees no topic: the console acts as him")
    finally:
        if page:
            page.quit()
    broker.stop()


def free_port():
    """A port free on loopback now."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def console_off(root):
    broker = Broker(os.path.join(root, "off"), "--console", "off")
    for path in ("/", "/console.js", "/api/overview"):
        with contextlib.suppress(urllib.error.HTTPError), urllib.request.urlopen(broker.url + path, timeout=10):
            fail(f"--console off: GET {path} answered")
    with urllib.request.urlopen(broker.url + "/metrics", timeout=10) as response:
        check(response.status == 200, "--console off: no page and no API (404), /metrics still served")
    broker.stop()


def served(broker):
    for path, kind in (("/", "text/html"), ("/console.js", "javascript"), ("/console.css", "text/css")):
        with urllib.request.urlopen(broker.url + path, timeout=10) as response:
            body = response.read()
            content_type = response.headers["Content-Type"] or ""
        check(kind in content_type and body, f"GET {path}: {content_type}, {len(body)} bytes")
        name = "index.html" if path == "/" else path[1:]
        on_disk = open(os.path.join(HERE, "../../crates/strand/src/console/assets", name), "rb").read()
        if body != on_disk:
            log(f"note: {path} differs from the file in the repository (a binary built before the change?)")


def main():
    signal.signal(signal.SIGTERM, lambda *_: fail("terminated (SIGTERM)"))  # clean up as on a failure
    root = tempfile.mkdtemp(prefix="strand-console-")
    page = None
    failed = True
    try:
        broker = Broker(os.path.join(root, "read-write"))
        log(f"broker: Kafka {broker.kafka}, HTTP {broker.url}")
        served(broker)
        page = Page(ASSETS and asset_proxy(broker.url) or broker.url)
        topics_and_errors(page, broker)
        acknowledged = produce_records(broker)
        other_topics(broker)
        message_browser(page, acknowledged)
        transactions(page, broker)
        alter_configs(page, broker)
        consumer = group_lag(page, broker, acknowledged)
        throughput(page, broker)
        delete_through_page(page, broker)
        refused_without_json(broker)
        for entry in page.driver.get_log("browser"):
            if entry["level"] == "SEVERE" and "favicon" not in entry["message"] and " 409 " not in entry["message"]:
                fail(f"an error in the browser's console: {entry['message']}")
        ok("no script error in the browser's console")
        CLIENTS.remove(consumer)
        consumer.close()
        page.quit()
        page = None
        broker.stop()
        read_only(root)
        console_off(root)
        signed_in(root)
        failed = False
        log("console: passed")
    finally:
        if failed and page:
            try:
                page.driver.save_screenshot(os.path.join(root, "failure.png"))
                log(f"the page at the failure: {page.driver.current_url}, {root}/failure.png")
                for entry in page.driver.get_log("browser"):
                    log(f"browser: {entry['level']} {entry['message']}")
            except WebDriverException:
                pass
        for client in CLIENTS:
            try:
                client.close()
            except RuntimeError:
                pass  # closed already
        if page:
            page.quit()
        for process in PROCESSES:
            if process.poll() is None:
                process.kill()
                process.wait(10)
        if failed:
            log(f"broker logs in {root}")


if __name__ == "__main__":
    main()
