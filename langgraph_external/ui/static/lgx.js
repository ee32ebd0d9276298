/* lgx ui / lgx timeline: selection, axis, filters and collapsing of the run tree.
   Every text comes from the server-rendered page or is set with textContent: this script
   never turns data into markup. */
(function () {
  "use strict";
  var tree = document.getElementById("tree");
  var pane = document.getElementById("details");
  if (!tree || !pane) { document.body.setAttribute("data-rendered", "0"); return; }
  var rows = Array.prototype.slice.call(tree.querySelectorAll(".row"));
  var byId = {};
  rows.forEach(function (r) { byId[r.getAttribute("data-row")] = r; });
  var current = null;
  var envelopes = null;

  function recorded() {
    if (envelopes === null) {
      var node = document.getElementById("lgx-data");
      envelopes = node ? JSON.parse(node.textContent).envelopes : [];
    }
    return envelopes;
  }

  function showRaw(section, row) {
    var box = section.querySelector(".raw-events");
    if (!box || box.getAttribute("data-filled")) return;
    var envs = recorded();
    (row.getAttribute("data-events") || "").split(",").forEach(function (ix) {
      if (ix === "") return;
      var env = envs[Number(ix)];
      if (!env) return;
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
    box.setAttribute("data-filled", "1");
  }

  function showSection(id) {
    Array.prototype.forEach.call(pane.querySelectorAll(":scope > section"), function (s) {
      s.hidden = s.id !== id;
    });
  }

  function select(id, scroll) {
    var row = byId[String(id)];
    if (!row) return false;
    if (current) current.classList.remove("sel");
    current = row;
    row.classList.add("sel");
    var section = document.getElementById("detail-" + id);
    if (section) { showSection(section.id); showRaw(section, row); }
    pane.scrollTop = 0;
    if (scroll) row.scrollIntoView({ block: "nearest" });
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
  Array.prototype.forEach.call(pane.querySelectorAll("details.raw"), function (d) {
    d.addEventListener("toggle", function () {
      var s = d.closest("section"), row = s && byId[s.getAttribute("data-row")];
      if (row) showRaw(s, row);
    });
  });

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
  window.lgx = { select: select, conversation: conversation, setAxis: setAxis, rows: rows };
  document.body.setAttribute("data-rendered", String(rows.length));
})();
