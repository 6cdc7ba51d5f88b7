"""OfficeHome (Venkateswara et al., CVPR 2017): 15,588 images, 65 classes, 4 domains (Art 2,427,
Clipart 4,365, Product 4,439, Real World 4,357), laid out ``<domain>/<class>/<image>``.

Same sources and store as PACS (:mod:`benchlib.data.domain_folders`): ``officehome`` fetches the zip
DomainBed downloads from Google Drive (``OfficeHomeDataset_10072016/<domain>/<class>/``; no
checksum published: counts are verified, ``params.sha256`` may pin one), ``officehome_local``
reads a local folder. TFL (Appendix, Table 9) splits each domain evenly into 5 clients.
"""

from __future__ import annotations

from benchlib.data.domain_folders import DomainDataset, register_domain_dataset

OFFICEHOME = DomainDataset(
    "officehome",
    15588,
    65,
    4,
    "OfficeHome.zip",
    "https://drive.usercontent.google.com/download?id=1uY0pj7oFsjMxRwaD3Sxy0jgel0fsYXLC"
    "&export=download&confirm=t",
)

register_domain_dataset(OFFICEHOME, "OfficeHome: 4 domains x 65 classes (TFL Table 9)")
