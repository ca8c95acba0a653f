// The page's script: it puts the page key in the forms the page posts, and
// keeps the page live: the daemon says "change" on /events and the page
// fetches its live part again, rendered on the server like the rest. No
// framework, nothing from the network but this page's own origin.
(function () {
	'use strict';
	// Every form the page posts carries the page key, which login.js put
	// in this origin's storage: the session cookie alone, which reaches
	// every server on this host, cannot act. Logging out forgets it.
	document.addEventListener('submit', function (ev) {
		var form = ev.target;
		var field = form && form.querySelector && form.querySelector('input[name="pagekey"]');
		if (!field) { return; }
		try {
			field.value = window.localStorage.getItem('danyue-page-key') || '';
			if (form.getAttribute('action') === '/logout') { window.localStorage.removeItem('danyue-page-key'); }
		} catch (e) { /* no storage: the daemon answers what to do */ }
	}, true);

	var live = document.getElementById('live');
	var state = document.getElementById('live-state');
	if (!live || !window.EventSource || !window.fetch) {
		if (state) { state.textContent = 'reload for updates'; }
		return;
	}
	var busy = false, again = false;
	function show(text, cls) { state.textContent = text; state.className = 'state ' + cls; }
	function refresh() {
		if (busy) { again = true; return; }
		busy = true;
		fetch('/fragment' + location.search, { credentials: 'same-origin', cache: 'no-store' })
			.then(function (r) {
				if (!r.ok) { throw new Error('status ' + r.status); }
				return r.text();
			})
			.then(function (html) {
				live.innerHTML = html;
				live.dataset.refreshed = String((Number(live.dataset.refreshed) || 0) + 1);
			})
			.catch(function () { show('not updating: reload the page', 'off'); })
			.then(function () {
				busy = false;
				if (again) { again = false; refresh(); }
			});
	}
	var opened = false;
	var events = new EventSource('/events');
	events.addEventListener('change', refresh);
	events.onopen = function () {
		show('live', 'on');
		// After a reconnect, changes may have been missed.
		if (opened) { refresh(); }
		opened = true;
	};
	events.onerror = function () { show('reconnecting…', 'off'); };
})();
