/* lgx ui / lgx timeline: selection, axis, filters and collapsing of the run tree.
   Markup comes only from the server's templates (the page, or a row's details rendered on
   the server when it is selected); recorded data this script receives as JSON is set with
   textContent: it never turns data into markup. */
(function () {
  "use strict";
  var tree = document.getElementById("tree");
  var pane = document.getElementById("details");
  if (!tree || !pane) { document.body.setAttribute("data-rendered", "0"); return; }
  var rows = Array.prototype.slice.call(tree.querySelectorAll(".row"));
  var byId = {};
  rows.forEach(function (r) { byId[r.getAttribute("data-row")] = r; });
  var current = null;
  var embedded = null;

  /* The recorded events of some seqs: embedded in a standalone page, else fetched (JSON). */
  function recorded(seqs, done) {
    var node = document.getElementById("lgx-data");
    if (node) {
      if (embedded === null) {
        embedded = {};
        JSON.parse(node.textContent).envelopes.forEach(function (e) { embedded[e.seq] = e; });
      }
      done(seqs.map(function (s) { return embedded[s]; }).filter(Boolean));
      return;
    }
    var url = tree.getAttribute("data-events-url");
    if (!url) { done([]); return; }
    fetch(url + "&seq=" + seqs.join(","), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : []; })
      .then(done, function () { done([]); });
  }

  function showRaw(section, row) {
    var box = section.querySelector(".raw-events");
    var details = section.querySelector("details.raw");
    if (!box || !details || !details.open || box.getAttribute("data-filled")) return;
    box.setAttribute("data-filled", "1");
    var seqs = (row.getAttribute("data-events") || "").split(",").filter(Boolean);
    recorded(seqs, function (envs) {
      envs.forEach(function (env) {
        var h = document.createElement("div");
        h.className = "muted";
        h.textContent = "seq " + env.seq + " · " + env.kind;
        var pre = document.createElement("pre");
        pre.className = "payload";
        pre.setAttribute("data-seq", String(env.seq));
        pre.textContent = JSON.stringify(env, null, 2);
        box.appendChild(h);
        box.appendChild(pre);
      });
    });
  }

  function showSection(id) {
    Array.prototype.forEach.call(pane.querySelectorAll(":scope > section"), function (s) {
      s.hidden = s.id !== id;
    });
  }

  function rawToggle(section) {
    var d = section.querySelector("details.raw");
    if (d) d.addEventListener("toggle", function () { showRaw(section, byId[section.getAttribute("data-row")]); });
  }

  function show(section, row) {
    showSection(section.id);
    showRaw(section, row);
    pane.setAttribute("data-row", row.getAttribute("data-row"));
    pane.scrollTop = 0;
  }

  function select(id, scroll) {
    var row = byId[String(id)];
    if (!row) return false;
    if (current) current.classList.remove("sel");
    current = row;
    row.classList.add("sel");
    if (scroll) row.scrollIntoView({ block: "nearest" });
    pane.removeAttribute("data-row");
    var section = document.getElementById("detail-" + id);
    var holder = document.getElementById("pane-row");
    if (section && section.parentNode === pane) { show(section, row); return true; }
    if (!holder) return true;
    /* the web app renders a row's details on the server when it is selected */
    fetch(holder.getAttribute("data-url") + "&row=" + encodeURIComponent(id), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : ""; })
      .then(function (text) {
        if (current !== row) return;
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fetched = doc.querySelector("section.detail");
        if (!fetched) return;
        var node = document.importNode(fetched, true);
        node.removeAttribute("id");
        holder.replaceChildren(node);
        holder.setAttribute("data-row", String(id));
        rawToggle(holder);
        show(holder, row);
      });
    return true;
  }

  function conversation() {
    if (current) current.classList.remove("sel");
    current = null;
    showSection("pane-conversation");
  }

  function descendants(row) {
    var out = [], depth = Number(row.getAttribute("data-depth"));
    for (var n = row.nextElementSibling; n && Number(n.getAttribute("data-depth")) > depth; n = n.nextElementSibling) out.push(n);
    return out;
  }

  tree.addEventListener("click", function (ev) {
    var row = ev.target.closest(".row");
    if (!row) return;
    if (ev.target.closest(".caret") && row.getAttribute("data-kids") === "1") {
      var closed = row.classList.toggle("closed");
      ev.target.closest(".caret").textContent = closed ? "▸" : "▾";
      descendants(row).forEach(function (d) {
        if (closed) d.classList.add("collapsed-hidden");
        else d.classList.remove("collapsed-hidden");
      });
      return;
    }
    select(row.getAttribute("data-row"), false);
    history.replaceState(null, "", "#row=" + row.getAttribute("data-row"));
  });
  pane.addEventListener("click", function (ev) {
    var b = ev.target.closest("[data-action=conversation]");
    if (b) { ev.preventDefault(); conversation(); }
  });
  Array.prototype.forEach.call(pane.querySelectorAll(":scope > section.detail"), rawToggle);

  function setAxis(mode) {
    tree.parentNode.classList.remove("axis-time", "axis-seq");
    tree.parentNode.classList.add("axis-" + mode);
    ["time", "seq"].forEach(function (m) {
      var b = document.getElementById("mode-" + m);
      if (b) b.className = m === mode ? "on" : "";
    });
  }
  ["time", "seq"].forEach(function (m) {
    var b = document.getElementById("mode-" + m);
    if (b) b.addEventListener("click", function () { setAxis(m); });
  });
  Array.prototype.forEach.call(document.querySelectorAll(".legend input[data-kind]"), function (box) {
    box.addEventListener("change", function () {
      tree.parentNode.classList.toggle("hide-" + box.getAttribute("data-kind"), !box.checked);
    });
  });

  function fromHash() {
    var h = location.hash;
    var m = /(?:^#|&)row=(\d+)/.exec(h);
    if (m) { select(m[1], true); }
    m = /(?:^#|&)seq=(\d+)/.exec(h);
    if (m) {
      var seq = Number(m[1]);
      for (var i = 0; i < rows.length; i++) {
        var s0 = Number(rows[i].getAttribute("data-s0")), s1 = Number(rows[i].getAttribute("data-s1"));
        if (s0 === seq || s1 === seq) { select(rows[i].getAttribute("data-row"), true); break; }
      }
    }
    if (/(?:^#|&)axis=seq/.test(h)) setAxis("seq");
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();

  /* The web app verifies after the page is shown (it reads the whole chain). */
  var live = document.getElementById("verify-live");
  if (live) {
    fetch(live.getAttribute("data-url"), { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (v) {
        var badge = document.getElementById("verify-badge");
        var ok = v.ok === true, bad = v.ok === false;
        document.getElementById("verify-headline").textContent = v.headline || v.error || "";
        document.getElementById("verify-note").textContent = v.note || "";
        var list = document.getElementById("verify-problems");
        (v.problems || []).forEach(function (p) {
          var d = document.createElement("div");
          d.className = "err";
          d.textContent = "· " + p;
          list.appendChild(d);
        });
        if (badge) {
          badge.textContent = v.headline || "not verified";
          badge.className = "badge" + (ok ? " ok" : bad ? " bad" : "");
        }
        var panel = document.getElementById("verification");
        if (panel) panel.className = "panel verify " + (ok ? "ok" : bad ? "bad" : "na");
        document.body.setAttribute("data-verified", ok ? "ok" : bad ? "failed" : "unknown");
      }, function () { document.body.setAttribute("data-verified", "error"); });
  }
  window.lgx = { select: select, conversation: conversation, setAxis: setAxis, rows: rows };
  document.body.setAttribute("data-rendered", String(rows.length));
})();
