// The login page hands the session's page key to this origin's storage,
// once, and goes on to the page. The key never comes back from the daemon:
// the session cookie reaches every server on this host, whatever its port,
// but localStorage is kept per origin, port included, so only this page's
// script can send the key with a form (app.js).
(function () {
	'use strict';
	var meta = document.querySelector('meta[name="danyue-page-key"]');
	var state = document.getElementById('login-state');
	try {
		window.localStorage.setItem('danyue-page-key', meta.content);
	} catch (e) {
		state.textContent = 'Logged in for reading, but this browser keeps no storage for the page, so it cannot act: ' +
			'allow site data for it and run danyue open again.';
		var a = document.createElement('a');
		a.href = '/';
		a.textContent = ' Open the page.';
		state.appendChild(a);
		return;
	}
	meta.content = '';
	window.location.replace('/');
})();
