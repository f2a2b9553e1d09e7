"""Pages domains, as site administration scripts manage them."""

from depot import connect, error_of, report

gl = connect()
out = {}

site = gl.projects.create({"name": "site", "visibility": "private"})
domain = site.pagesdomains.create({"domain": "www.site.example"})
out["created"] = [domain.domain, domain.url, domain.verified, len(domain.verification_code)]
out["listed"] = [d.domain for d in site.pagesdomains.list()]
got = site.pagesdomains.get("www.site.example")
got.auto_ssl_enabled = True
got.save()
out["saved"] = site.pagesdomains.get("www.site.example").auto_ssl_enabled
out["admin_list"] = [[d.domain, d.project_id == site.id] for d in gl.pagesdomains.list()]
out["bad_name"] = error_of(lambda: site.pagesdomains.create({"domain": "bad_name.example"}))
out["taken"] = error_of(lambda: site.pagesdomains.create({"domain": "WWW.site.example"}))
site.pagesdomains.delete("www.site.example")
out["deleted"] = error_of(lambda: site.pagesdomains.get("www.site.example"))
report(out)
