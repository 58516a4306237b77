import Foundation

/// The event list under the picture: every mark and wait of the timeline in words, in
/// order of time, lines of the same time in the log's order. Made on the thread that renders the page.
extension TimelineRenderer {
    func eventList() -> String {
        guard let origin = timeline.start else { return "" }
        var seen = Set<String>()
        var rows: [String] = []
        // In order of time, and of the log among marks of the same time (the sort is not stable).
        let ordered = timeline.marks.enumerated().sorted {
            ($0.element.time, $0.element.line ?? .max, $0.offset)
                < ($1.element.time, $1.element.line ?? .max, $1.offset)
        }
        for mark in ordered.map(\.element) {
            let key = "\(mark.time.timeIntervalSince1970)|\(mark.detail)"
            guard seen.insert(key).inserted else { continue }
            rows.append("<tr><td>\(Self.escape(TimelineBuilder.clock(mark.time)))</td><td>\(String(format: "+%.3f s", mark.time.timeIntervalSince(origin)))</td><td>\(Self.escape(mark.task.map { "task \($0.task)" } ?? ""))</td><td>\(Self.escape(mark.detail))</td></tr>")
        }
        for wait in timeline.waits.sorted(by: { $0.start < $1.start }) {
            rows.append("<tr class=\"wait-row\"><td>\(Self.escape(TimelineBuilder.clock(wait.start)))</td><td>\(String(format: "+%.3f s", wait.start.timeIntervalSince(origin)))</td><td>task \(wait.task.task)</td><td>waits \(Self.escape(Self.duration(wait.end.timeIntervalSince(wait.start))))\(wait.open ? " (and still does)" : ""): \(Self.escape(wait.reason))</td></tr>")
        }
        return "<details id=\"events\" open><summary>Every event (\(rows.count))</summary><table><tr><th>time</th><th>since start</th><th>task</th><th>what</th></tr>\n" + rows.joined(separator: "\n") + "</table></details>\n"
    }

    static let style = """
    body{font-family:"DejaVu Sans","Liberation Sans",Arial,sans-serif;margin:16px 20px;color:#212529;background:#fff;min-width:1380px}
    h1{font-size:20px;margin:0 0 4px}h2{font-size:15px;margin:12px 0 4px}
    .meta,.hint{color:#495057;font-size:12px;margin:2px 0 8px}.note{background:#fff3bf;padding:6px 10px;font-size:13px}
    .empty{background:#f1f3f5;padding:12px;font-size:14px}
    #findings{background:#f3f0ff;border-left:4px solid #9c36b5;padding:4px 12px;font-size:13px}
    .legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;margin:8px 0}.legend span{display:inline-flex;align-items:center;gap:4px}
    .chart{overflow-x:auto}.section{font-weight:bold;font-size:13px;fill:#495057}.tick,.axis-origin{fill:#495057;font-size:11px}
    table{border-collapse:collapse;font-size:12px}td,th{border-bottom:1px solid #e9ecef;padding:2px 8px;text-align:left;vertical-align:top}td:nth-child(-n+3),th{white-space:nowrap}
    .wait-row td{color:#5f3dc4}
    """

    /// Measures what the browser drew and writes it as JSON into `#render-summary`.
    static let measuringScript = """
    (function () {
      var svg = document.getElementById('timeline');
      var out = {svg: !!svg, noLog: !!document.getElementById('no-log'), lanes: [], bars: [], marks: [], labels: {visible: 0, clipped: 0, overlapping: 0}, now: null,
                 findings: Array.prototype.map.call(document.querySelectorAll('#findings li'), function (li) { return li.textContent; })};
      if (svg) {
        // The labels were placed with estimated text widths; with the real ones, a label that
        // would cover a more telling one of its row (they come most telling first) is hidden:
        // its mark keeps its tooltip, and the event list says it in words.
        var hidden = 0;
        svg.querySelectorAll('g.lane, g.task').forEach(function (g) {
          var kept = [];
          g.querySelectorAll('text.label').forEach(function (t) {
            var r = t.getBoundingClientRect();
            var covers = kept.some(function (k) { return r.left < k.right + 2 && k.left < r.right + 2 && r.top < k.bottom && k.top < r.bottom; });
            if (covers) { t.setAttribute('visibility', 'hidden'); hidden++; } else { kept.push(r); }
          });
        });
        out.labelsHiddenForRoom = hidden;
        var box = svg.getBoundingClientRect();
        out.width = box.width; out.height = box.height;
        var now = svg.querySelector('g.now line');
        if (now) { out.now = now.getBoundingClientRect().left - box.left; }
        var inside = function (b) { return b.width > 0 && b.height > 0 && b.left >= box.left - 1 && b.right <= box.right + 1 && b.top >= box.top - 1 && b.bottom <= box.bottom + 1; };
        svg.querySelectorAll('g.lane').forEach(function (g) {
          var b = g.querySelector('rect.span').getBoundingClientRect();
          out.lanes.push({id: g.dataset.lane, kind: g.dataset.kind, process: g.dataset.process, pid: +g.dataset.pid, x: b.left - box.left, width: b.width, drawn: inside(b)});
        });
        svg.querySelectorAll('g.task').forEach(function (g) {
          var b = g.querySelector('rect.bar').getBoundingClientRect();
          var waits = [];
          g.querySelectorAll('rect.wait').forEach(function (w) { var r = w.getBoundingClientRect(); waits.push({kind: w.dataset.kind, x: r.left - box.left, width: r.width, reason: (w.querySelector('title') || {}).textContent}); });
          out.bars.push({task: g.dataset.task, open: g.dataset.open === 'true', x: b.left - box.left, width: b.width, drawn: inside(b), waits: waits});
        });
        svg.querySelectorAll('g.mark').forEach(function (m) {
          var b = m.getBoundingClientRect();
          out.marks.push({kind: m.dataset.kind, task: m.dataset.task || null, lane: m.dataset.lane || null, time: m.dataset.time, x: b.left + b.width / 2 - box.left, drawn: inside(b)});
        });
        var texts = Array.prototype.slice.call(svg.querySelectorAll('text.label, text.name, text.tick, text.wait-label')).filter(function (t) { return t.getAttribute('visibility') !== 'hidden'; });
        var rects = texts.map(function (t) { return t.getBoundingClientRect(); });
        rects.forEach(function (r, i) {
          if (inside(r)) { out.labels.visible++; } else { out.labels.clipped++; }
          for (var j = i + 1; j < rects.length; j++) {
            var s = rects[j];
            if (texts[i].classList.contains('label') && texts[j].classList.contains('label') && r.left < s.right - 1 && s.left < r.right - 1 && r.top < s.bottom - 1 && s.top < r.bottom - 1) { out.labels.overlapping++; }
          }
        });
      }
      document.getElementById('render-summary').textContent = JSON.stringify(out);
      document.documentElement.setAttribute('data-rendered', 'yes');
    })();
    """
}
