"""A document and model output that try to run script in the report; the report must show them as text."""

PAYLOADS = (
    '<script>window.__pwned = "script"; alert("script")</script>',
    '<img src=x onerror="window.__pwned = \'img\'; alert(\'img\')">',
    '<a href="javascript:window.__pwned=\'link\'">a javascript: link</a>',
    '</script><script>window.__pwned = "breakout"</script>',
    '<svg onload="window.__pwned = \'svg\'"></svg> <iframe src="javascript:alert(1)"></iframe>',
    '<style>body { display: none }</style> {{ 7 * 7 }} ${7*7} \\u003cscript\\u003e',
)

HOSTILE_DOC = (
    '<script>window.__pwned = "title"</script> Ship log\n\n'
    "On 6 July we finished taking in cargo, silver sand and boxes of earth. "
    + " ".join(PAYLOADS) + "\n\n"
    "The captain wrote that the mate had gone mad. " + PAYLOADS[1] + " He was lost at sea.\n\n"
    "Five hands, two mates and a cook sailed with the Demeter from Varna. " + PAYLOADS[2] + "\n"
)

HOSTILE_REPLY = "The answer is " + " ".join(PAYLOADS)
